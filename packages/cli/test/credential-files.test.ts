// The settings that name a credential file (the cluster secret, etcd's certificates and password): a file
// that cannot be used ends the binary with exit 2, like any other settings error, naming the setting and the file.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runBinary, runInProcess } from './binary.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-credentials-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const notPem = join(dir, 'not.pem');
writeFileSync(notPem, 'not a certificate\n');
const missing = join(dir, 'missing.pem');
const etcd = ['--discovery-backend', 'etcd', '--discovery-etcd-endpoints', 'https://127.0.0.1:1'];

describe('a credential file a setting names that cannot be used: exit 2, one line naming the setting and the file', () => {
  it.each([
    [
      'discovery.etcd_ca_file',
      ['--discovery-etcd-ca-file', missing],
      `etcd discovery: discovery.etcd_ca_file "${missing}" cannot be used: ENOENT`,
      'DISCOVERY_CREDENTIALS_FILE_UNREADABLE',
    ],
    [
      'discovery.etcd_cert_file',
      ['--discovery-etcd-cert-file', notPem, '--discovery-etcd-key-file', notPem],
      `etcd discovery: discovery.etcd_cert_file "${notPem}" cannot be used: not a PEM certificate`,
      'DISCOVERY_CREDENTIALS_FILE_UNREADABLE',
    ],
    [
      'discovery.etcd_password_file',
      ['--discovery-etcd-username', 'decode-0', '--discovery-etcd-password-file', missing],
      `etcd discovery: discovery.etcd_password_file "${missing}" cannot be used: ENOENT`,
      'DISCOVERY_CREDENTIALS_FILE_UNREADABLE',
    ],
  ])('inspect, %s', async (_setting, flags, message, code) => {
    const run = await runBinary(['inspect', ...etcd, ...flags]);
    expect(run.stderrLines).toHaveLength(1);
    expect(run.stderrLines[0]).toMatch(
      new RegExp(`^kvreuse: ${message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}.* \\[${code}\\]$`),
    );
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
  });

  it('demo, discovery.secret_file open to others or missing: refused before any rank starts', async () => {
    const open = join(dir, 'open.secret');
    writeFileSync(open, 's'.repeat(32), { mode: 0o644 });
    for (const [secretFile, reason] of [
      [open, 'is open to its group or others (mode 0644); chmod 600 it'],
      [join(dir, 'missing.secret'), 'cannot be opened (ENOENT)'],
    ] as const) {
      const run = await runBinary(['demo', '--backend', 'loopback', '--discovery-secret-file', secretFile]);
      expect(run.stderrLines).toEqual([
        `kvreuse: cluster secret discovery.secret_file = ${secretFile} ${reason} [CLUSTER_SECRET_REFUSED]`,
      ]);
      expect(run.status).toBe(2);
      expect(run.stdout).toBe('');
    }
  });
});

describe('credentials written into an etcd URL are never echoed', () => {
  const password = 'hunter2-in-the-url';
  const url = `http://alice:${password}@127.0.0.1:2379`;

  it.each([
    ['argv', ['inspect', '--discovery-backend', 'etcd', '--discovery-etcd-endpoints', url], {}],
    ['env', ['inspect', '--discovery-backend', 'etcd'], { KVREUSE_DISCOVERY_ETCD_ENDPOINTS: JSON.stringify([url]) }],
    ['a settings file', ['config', 'show', '--config', join(dir, 'url.yaml')], {}],
  ])('in %s: the refusal names the host, with *** for the user and password', async (_where, args, env) => {
    writeFileSync(join(dir, 'url.yaml'), `discovery:\n  backend: etcd\n  etcd_endpoints: ["${url}"]\n`);
    const run = await runBinary(args, { env });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('http://***@127.0.0.1:2379');
    expect(run.stderr).not.toContain(password);
    expect(run.stderr).not.toContain('alice');
    expect(run.stdout).not.toContain(password);
  });
});

describe('a credential file named by a relative path: taken from the command’s working directory', () => {
  it('inspect, discovery.etcd_ca_file', async () => {
    const run = await runInProcess(['inspect', ...etcd, '--discovery-etcd-ca-file', 'not.pem'], { cwd: dir });
    expect(run.stderrLines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^kvreuse: etcd discovery: discovery.etcd_ca_file "${notPem}" cannot be used: not a PEM certificate`,
        ),
      ),
    ]);
    expect(run.status).toBe(2);
  });

  it('demo, discovery.secret_file', async () => {
    writeFileSync(join(dir, 'relative.secret'), 's'.repeat(32), { mode: 0o644 });
    const run = await runInProcess(['demo', '--backend', 'loopback', '--discovery-secret-file', 'relative.secret'], {
      cwd: dir,
    });
    expect(run.stderrLines).toEqual([
      `kvreuse: cluster secret discovery.secret_file = ${join(dir, 'relative.secret')} is open to its group or others (mode 0644); chmod 600 it [CLUSTER_SECRET_REFUSED]`,
    ]);
    expect(run.status).toBe(2);
  });
});
