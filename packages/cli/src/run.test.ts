import { InvalidSettingError } from '@kvreuse/config';
import { UnknownProfileError } from '@kvreuse/profile-admission';
import {
  ClusterSecretError,
  DiscoveryAuthenticationError,
  DiscoveryCredentialsFileError,
  DiscoverySettingsError,
  DiscoveryTlsError,
  DiscoveryUnavailableError,
} from '@kvreuse/discovery';
import { CleanupFailedError } from '@kvreuse/errors';
import { describe, expect, it } from 'vitest';
import { UsageError } from './errors.js';
import { exitCodeOf, runCli } from './run.js';

function capture() {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    context: {
      stdout: (text: string) => (out.stdout += text),
      stderr: (text: string) => (out.stderr += text),
      env: {},
      cwd: '/',
    },
  };
}

describe('runCli', () => {
  it('returns 0 and writes the command output', async () => {
    const { out, context } = capture();
    expect(await runCli(['config', 'show', '--transport-backend', 'loopback'], context)).toBe(0);
    expect(out.stdout).toMatch(/^transport\.backend +loopback +argv --transport-backend$/m);
    expect(out.stderr).toBe('');
  });

  it('returns the exit status of an error and writes it as one line', async () => {
    const { out, context } = capture();
    expect(await runCli(['nope'], context)).toBe(2);
    expect(out.stderr.split('\n')).toEqual([expect.stringMatching(/^kvreuse: unknown command "nope"/), '']);
  });
});

describe('exitCodeOf', () => {
  it('2 for what the user fixes, 1 for anything else', () => {
    expect(exitCodeOf(new UsageError('x', 'y'))).toBe(2);
    expect(exitCodeOf(new InvalidSettingError([]))).toBe(2);
    expect(exitCodeOf(new UnknownProfileError('p', []))).toBe(2);
    expect(
      exitCodeOf(new ClusterSecretError('/s', 'is not a regular file', { setting: 'discovery.secret_file' })),
    ).toBe(2);
    expect(
      exitCodeOf(new DiscoveryCredentialsFileError('etcd', 'discovery.etcd_ca_file', '/ca.pem', 'the file is empty')),
    ).toBe(2);
    expect(
      exitCodeOf(
        new DiscoverySettingsError('discovery.etcd_password_file', '', 'is needed with discovery.etcd_username'),
      ),
    ).toBe(2);
    expect(exitCodeOf(new DiscoveryTlsError('etcd', 'get', ['https://127.0.0.1:2379']))).toBe(2);
    expect(exitCodeOf(new DiscoveryAuthenticationError('etcd', 'get', 'decode-0'))).toBe(2);
    expect(exitCodeOf(new DiscoveryUnavailableError('etcd', 'get', undefined))).toBe(1);
    expect(exitCodeOf(new Error('boom'))).toBe(1);
  });

  it('of a failure wrapped with its cleanup’s failure, the status the failure alone would have had', () => {
    const closeFailure = new Error('the agent would not close');
    const wrapped = (thrown: unknown) => new CleanupFailedError(thrown, 'closing the agent', [closeFailure]);
    expect(exitCodeOf(wrapped(Object.freeze(new UsageError('serve', 'the port is taken'))))).toBe(2);
    expect(exitCodeOf(wrapped(Object.freeze(new InvalidSettingError([]))))).toBe(2);
    expect(exitCodeOf(wrapped(new DiscoveryUnavailableError('etcd', 'get', undefined)))).toBe(1);
    expect(exitCodeOf(wrapped('refused'))).toBe(1);
  });
});
