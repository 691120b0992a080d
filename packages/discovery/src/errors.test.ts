import { describe, expect, it } from 'vitest';
import { DiscoveryAuthenticationError, DiscoveryTlsError, DiscoveryUnavailableError } from './errors.js';

/** An Error whose `message` throws when read. */
function unreadable(): Error {
  const error = new Error('hidden');
  Object.defineProperty(error, 'message', {
    get() {
      throw new Error('no reading');
    },
  });
  return error;
}

const refused = new Error('connection refused');

describe("discovery errors' causes", () => {
  it("end the message with the cause's, where the cause is an Error", () => {
    expect(new DiscoveryUnavailableError('etcd', 'get', '/k', { cause: refused }).message).toBe(
      'etcd discovery: get of key "/k" failed: connection refused',
    );
    expect(new DiscoveryTlsError('etcd', 'get', ['https://e:2379'], { cause: refused }).message).toBe(
      'etcd discovery: get failed: the TLS handshake with https://e:2379 failed: connection refused',
    );
    expect(new DiscoveryAuthenticationError('etcd', 'get', undefined, { cause: refused }).message).toBe(
      'etcd discovery: get failed: the server requires authentication and no user is configured: connection refused',
    );
  });

  it('add nothing for a cause that is not an Error, and give way to a why', () => {
    expect(new DiscoveryTlsError('etcd', 'get', ['https://e:2379'], { cause: 'refused' }).message).toBe(
      'etcd discovery: get failed: the TLS handshake with https://e:2379 failed',
    );
    expect(new DiscoveryUnavailableError('etcd', 'get', '/k', { cause: refused, why: 'the lease ended' }).message).toBe(
      'etcd discovery: get of key "/k" failed: the lease ended',
    );
  });

  it('are made, not thrown over, for a cause whose message cannot be read', () => {
    const cause = unreadable();
    const suffix = ': an error whose message could not be read';
    expect(new DiscoveryUnavailableError('etcd', 'get', '/k', { cause }).message).toBe(
      `etcd discovery: get of key "/k" failed${suffix}`,
    );
    expect(new DiscoveryTlsError('etcd', 'get', ['https://e:2379'], { cause }).message).toMatch(
      new RegExp(`${suffix}$`),
    );
    expect(new DiscoveryAuthenticationError('etcd', 'get', 'decode-0', { cause }).message).toMatch(
      new RegExp(`${suffix}$`),
    );
  });
});
