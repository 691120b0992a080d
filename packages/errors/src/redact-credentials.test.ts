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
    expect(redactCredentials('1http://a:b@h 9+git+ssh://c@d x://@e http:// f@g')).toBe(
      '1http://***@h 9+git+ssh://***@d x://@e http:// f@g',
    );
    expect(redactCredentials('a://://b:c@h http://a:b@c@d')).toBe('a://://b:c@h http://***@c@d');
  });

  // A regular expression that tries every start of a scheme took minutes for a string of a million
  // letters, and an error describing one with it never came.
  it('reads a huge string once: a million letters, then a URL', () => {
    const huge = `${'x'.repeat(1_000_000)} http://alice:pw@etcd:2379 ${'y.'.repeat(500_000)}`;
    expect(redactCredentials(huge)).toBe(huge.replace('alice:pw@', '***@'));
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
