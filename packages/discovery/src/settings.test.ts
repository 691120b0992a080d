import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { discoveryGroup } from './settings.js';

describe('discoveryGroup', () => {
  const discovery = defineSettings([discoveryGroup]);

  it('resolves alone, to its defaults, and refuses a value that breaks its type', () => {
    const insecure = { etcdCaFile: '', etcdCertFile: '', etcdKeyFile: '', etcdUsername: '', etcdPasswordFile: '' };
    expect(discovery.defaults).toEqual({
      discovery: {
        backend: 'sqlite',
        sqlitePath: 'kvreuse-discovery.sqlite',
        sqliteFileMode: '0600',
        etcdEndpoints: ['http://127.0.0.1:2379'],
        ...insecure,
        secretFile: '',
        leaseTtlMs: 10_000,
      },
    });
    expect(() => discovery.resolve({ argv: ['--discovery-lease-ttl-ms=1500'] })).toThrow(InvalidSettingError);
  });

  it("refuses a lease TTL over etcd's maximum, naming the setting and the limit", () => {
    expect(discovery.resolve({ argv: ['--discovery-lease-ttl-ms=9000000000000'] }).settings.discovery.leaseTtlMs).toBe(
      9_000_000_000_000,
    );
    const limit = "at most 9000000000000 ms (etcd's maximum, 9,000,000,000 s)";
    expect(() =>
      discovery.resolve({ file: { text: 'discovery:\n  lease_ttl_ms: 9000000001000\n', origin: 'k.yaml' } }),
    ).toThrow(
      expect.objectContaining({
        message: expect.stringMatching(
          /discovery\.lease_ttl_ms = 9000000001000 in file k\.yaml:2: a lease TTL is at most 9000000000000 ms/,
        ),
      }),
    );
    expect(() => discovery.resolve({ argv: ['--discovery-lease-ttl-ms=9000000001000'] })).toThrow(
      expect.objectContaining({
        invalid: [expect.objectContaining({ setting: 'discovery.leaseTtlMs', reason: `a lease TTL is ${limit}` })],
      }),
    );
  });

  it('takes a secured etcd: certificate files over https, a user and the file of its password', () => {
    const { settings } = discovery.resolve({
      argv: [
        '--discovery-etcd-endpoints=https://127.0.0.1:2379',
        '--discovery-etcd-ca-file=ca.pem',
        '--discovery-etcd-cert-file=client.pem',
        '--discovery-etcd-key-file=client-key.pem',
      ],
      env: {
        KVREUSE_DISCOVERY_ETCD_USERNAME: 'worker-a',
        KVREUSE_DISCOVERY_ETCD_PASSWORD_FILE: '/run/secrets/etcd-worker-a',
      },
    });
    expect(settings.discovery).toMatchObject({
      etcdCaFile: 'ca.pem',
      etcdCertFile: 'client.pem',
      etcdKeyFile: 'client-key.pem',
      etcdUsername: 'worker-a',
      etcdPasswordFile: '/run/secrets/etcd-worker-a',
    });
  });

  it.each([
    [
      ['--discovery-etcd-cert-file=client.pem'],
      'discovery.etcd_cert_file and discovery.etcd_key_file are set together',
    ],
    [
      ['--discovery-etcd-key-file=client-key.pem'],
      'discovery.etcd_cert_file and discovery.etcd_key_file are set together',
    ],
    [
      ['--discovery-etcd-username=worker-a'],
      'discovery.etcd_username and discovery.etcd_password_file are set together',
    ],
    [
      ['--discovery-etcd-password-file=secret'],
      'discovery.etcd_username and discovery.etcd_password_file are set together',
    ],
    [['--discovery-etcd-ca-file=ca.pem'], 'are all https://'],
  ])('refuses %j, naming the rule it breaks', (argv, rule) => {
    expect(() => discovery.resolve({ argv })).toThrow(
      expect.objectContaining({ name: 'InvalidSettingError', message: expect.stringContaining(rule) }),
    );
  });

  it('takes octal file bits that let the owner read and write for the sqlite file, and nothing else', () => {
    expect(discovery.resolve({ argv: ['--discovery-sqlite-file-mode=0660'] }).settings.discovery.sqliteFileMode).toBe(
      '0660',
    );
    for (const mode of ['0400', '0060', '600x', '0888', '06000']) {
      expect(() => discovery.resolve({ argv: [`--discovery-sqlite-file-mode=${mode}`] })).toThrow(InvalidSettingError);
    }
  });

  it('echoes a URL among the refused values with *** for its user and password, in the message and the error', () => {
    const url = 'http://alice:hunter2@127.0.0.1:2379';
    let error: unknown;
    try {
      discovery.resolve({ argv: [`--discovery-etcd-endpoints=${url}`] });
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(InvalidSettingError);
    expect((error as InvalidSettingError).invalid[0]?.value).toBe('http://***@127.0.0.1:2379');
    for (const rendering of [String(error), JSON.stringify(error), inspect(error, { depth: null })]) {
      expect(rendering).not.toContain('hunter2');
    }
  });
});
