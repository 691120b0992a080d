import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { DiscoveryArgumentError, DiscoveryCredentialsFileError } from './errors.js';
import { createCertificateAuthority } from '@kvreuse-internal/test-support';
import { connectEtcdDiscovery } from './etcd.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-etcd-security-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pem = join(dir, 'some.pem');
writeFileSync(pem, '-----BEGIN CERTIFICATE-----\n');
const hosts = 'https://127.0.0.1:2379';

describe('an etcd store given certificate and password files', () => {
  it.each([
    ['tls.caFile', { tls: { caFile: join(dir, 'missing-ca.pem') } }, join(dir, 'missing-ca.pem'), /ENOENT/],
    ['tls.certFile', { tls: { certFile: dir, keyFile: pem } }, dir, /EISDIR/],
    [
      'tls.keyFile',
      { tls: { certFile: pem, keyFile: join(dir, 'missing-key.pem') } },
      join(dir, 'missing-key.pem'),
      /ENOENT/,
    ],
    [
      'auth.passwordFile',
      { auth: { username: 'worker-a', passwordFile: join(dir, 'missing-password') } },
      join(dir, 'missing-password'),
      /ENOENT/,
    ],
  ])('refuses a %s it cannot read, naming the option and the path', (option, options, path, reason) => {
    const open = () => connectEtcdDiscovery({ hosts, ...options });
    expect(open).toThrow(DiscoveryCredentialsFileError);
    expect(open).toThrow(
      expect.objectContaining({
        code: 'DISCOVERY_CREDENTIALS_FILE_UNREADABLE',
        option,
        path,
        reason: expect.stringMatching(reason),
      }),
    );
    expect(open).toThrow(path);
  });

  it('refuses an empty password file, and one that holds only its newline', () => {
    for (const content of ['', '\n']) {
      const passwordFile = join(dir, `password-${content.length}`);
      writeFileSync(passwordFile, content);
      expect(() => connectEtcdDiscovery({ hosts, auth: { username: 'worker-a', passwordFile } })).toThrow(
        expect.objectContaining({
          code: 'DISCOVERY_CREDENTIALS_FILE_UNREADABLE',
          option: 'auth.passwordFile',
          path: passwordFile,
        }),
      );
    }
  });

  it('refuses certificates for an http:// host, a certificate without its key, and a user without a name', () => {
    expect(() =>
      connectEtcdDiscovery({ hosts: ['https://127.0.0.1:2379', 'http://127.0.0.1:2380'], tls: { caFile: pem } }),
    ).toThrow(
      expect.objectContaining({
        code: 'DISCOVERY_INVALID_ARGUMENT',
        argument: 'hosts',
        value: 'http://127.0.0.1:2380',
      }),
    );
    expect(() => connectEtcdDiscovery({ hosts, tls: { certFile: pem } })).toThrow(
      expect.objectContaining({ argument: 'tls.certFile' }),
    );
    expect(() => connectEtcdDiscovery({ hosts, auth: { username: '', passwordFile: pem } })).toThrow(
      DiscoveryArgumentError,
    );
  });

  it("refuses, naming the option and the path, a file that is not PEM and a key that is not the certificate's", async () => {
    const ca = createCertificateAuthority(dir, 'security-ca');
    const client = ca.issue('security-client', 'client');
    const refused = (option: string, path: string, reason: RegExp) =>
      expect.objectContaining({
        code: 'DISCOVERY_CREDENTIALS_FILE_UNREADABLE',
        option,
        path,
        reason: expect.stringMatching(reason),
      });
    expect(() => connectEtcdDiscovery({ hosts, tls: { caFile: pem } })).toThrow(
      refused('tls.caFile', pem, /^not a PEM certificate/),
    );
    expect(() => connectEtcdDiscovery({ hosts, tls: { certFile: pem, keyFile: client.keyFile } })).toThrow(
      refused('tls.certFile', pem, /^not a PEM certificate/),
    );
    expect(() => connectEtcdDiscovery({ hosts, tls: { certFile: client.certFile, keyFile: pem } })).toThrow(
      refused('tls.keyFile', pem, /^not a PEM private key/),
    );
    expect(() => connectEtcdDiscovery({ hosts, tls: { certFile: client.certFile, keyFile: ca.keyFile } })).toThrow(
      refused('tls.keyFile', ca.keyFile, new RegExp(`^not the private key of tls.certFile ${client.certFile}`)),
    );
    const store = connectEtcdDiscovery({ hosts, tls: { caFile: ca.certFile, ...client } });
    await store.close();
  });

  it('keeps the password out of every rendering of the store: JSON, util.inspect, String', async () => {
    const password = 'the-etcd-password-itself';
    const passwordFile = join(dir, 'rendered.password');
    writeFileSync(passwordFile, `${password}\n`);
    const store = connectEtcdDiscovery({ hosts, auth: { username: 'worker-a', passwordFile } });
    for (const rendering of [
      JSON.stringify(store),
      inspect(store, { showHidden: true, depth: Number.POSITIVE_INFINITY, getters: true }),
      String(store),
    ]) {
      expect(rendering).not.toContain(password);
    }
    await store.close();
  });

  it('refuses a host URL that carries credentials, echoing neither the user nor the password', () => {
    const open = () =>
      connectEtcdDiscovery({ hosts: ['http://127.0.0.1:2379', 'http://alice:pw-in-url@127.0.0.1:2380'] });
    expect(open).toThrow(
      expect.objectContaining({
        code: 'DISCOVERY_INVALID_ARGUMENT',
        argument: 'hosts',
        value: 'http://***@127.0.0.1:2380',
      }),
    );
    let error: unknown;
    try {
      open();
    } catch (thrown) {
      error = thrown;
    }
    for (const rendering of [
      (error as Error).message,
      inspect(error, { depth: Number.POSITIVE_INFINITY }),
      JSON.stringify(error),
    ]) {
      expect(rendering).not.toContain('pw-in-url');
      expect(rendering).not.toContain('alice');
    }
  });
});
