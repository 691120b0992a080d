import { describe, expect, it } from 'vitest';
import { describeValue } from './describe-value.js';
import { redactCredentials, redactValue } from './redact-credentials.js';

describe('redactCredentials', () => {
  it("replaces every URL's user and password with ***, keeping the rest", () => {
    expect(redactCredentials('http://alice:pw@etcd-0:2379')).toBe('http://***@etcd-0:2379');
    expect(redactCredentials('https://token@host/path?q=a@b')).toBe('https://***@host/path?q=a@b');
    expect(redactCredentials('etcd at http://a:b@x:1 and https://c:d@y:2, then e@f')).toBe(
      'etcd at http://***@x:1 and https://***@y:2, then e@f',
    );
    expect(redactCredentials('http://etcd-0:2379')).toBe('http://etcd-0:2379');
    expect(redactCredentials('user@example.com')).toBe('user@example.com');
  });

  it('redactValue reaches strings inside arrays and plain objects and leaves other values alone', () => {
    expect(redactValue(['http://a:b@x:1', { hosts: ['http://c:d@y:2'] }, 3])).toEqual([
      'http://***@x:1',
      { hosts: ['http://***@y:2'] },
      3,
    ]);
    const bytes = new Uint8Array(2);
    expect(redactValue(bytes)).toBe(bytes);
  });

  it('describeValue shows no credential, even in a string it cuts', () => {
    const long = `http://alice:${'p'.repeat(100)}@host:2379`;
    expect(describeValue(long)).toBe('"http://***@host:2379"');
    expect(describeValue({ hosts: ['http://alice:secret@h:1'] })).toBe('{"hosts":["http://***@h:1"]}');
  });
});
