import { describe, expect, it } from 'vitest';
import {
  AdmissionRefusedError,
  ChildCommandError,
  CliError,
  DiscoveryNotFoundError,
  etcdInstallHint,
  EtcdUnavailableError,
  InputFileError,
  MetricsUnavailableError,
  NotACheckoutError,
  PeerProtocolError,
  PeerTimeoutError,
  PeerUnreachableError,
  SettingsNotValidError,
  TransportUnavailableError,
  ucxInstallHint,
  UnknownCommandError,
  UsageError,
} from './errors.js';
import * as errors from './errors.js';

describe('the errors of @kvreuse/cli', () => {
  it.each([
    [
      new UsageError('inspect', 'unexpected argument "x"'),
      'USAGE',
      2,
      'inspect: unexpected argument "x" (see kvreuse inspect --help)',
    ],
    [
      new UnknownCommandError('dump', ['show', 'schema'], 'config'),
      'UNKNOWN_COMMAND',
      2,
      'unknown command "dump" of kvreuse config: expected one of show, schema (see kvreuse config --help)',
    ],
    [
      new InputFileError('/w.json', 'must hold a JSON array of rank parts'),
      'INPUT_FILE',
      2,
      '/w.json: must hold a JSON array of rank parts',
    ],
    [
      new DiscoveryNotFoundError('/d.sqlite'),
      'DISCOVERY_NOT_FOUND',
      2,
      'discovery.sqlite_path = /d.sqlite: no such file (no worker has published to it; set --discovery-sqlite-path)',
    ],
    [new AdmissionRefusedError('p', 1), 'ADMISSION_REFUSED', 1, 'profile p refuses these facts (1 reason)'],
    [
      new SettingsNotValidError(3),
      'SETTINGS_NOT_VALID',
      2,
      'the settings are not valid: 3 problems, each listed on stdout',
    ],
    [
      new NotACheckoutError('bench', '/tmp'),
      'NOT_A_CHECKOUT',
      1,
      'bench runs from a kvreuse repository checkout (git clone https://github.com/kvreuse/kvreuse, then npm run bench); /tmp is not inside one',
    ],
    [
      new NotACheckoutError('bench', '/tmp', 'Use x instead'),
      'NOT_A_CHECKOUT',
      1,
      'bench runs from a kvreuse repository checkout (git clone https://github.com/kvreuse/kvreuse, then npm run bench); /tmp is not inside one. Use x instead',
    ],
    [
      new PeerUnreachableError('10.0.0.1:13700', 'connect ECONNREFUSED 10.0.0.1:13700'),
      'PEER_UNREACHABLE',
      1,
      'the peer 10.0.0.1:13700 cannot be reached: connect ECONNREFUSED 10.0.0.1:13700',
    ],
    [
      new PeerTimeoutError('10.0.0.1:13700', 'the completion of a read', 10_000),
      'PEER_TIMEOUT',
      1,
      'the completion of a read from 10.0.0.1:13700 did not come within 10 s (see --timeout)',
    ],
    [
      new PeerProtocolError('10.0.0.1:13700', 'refused the measurement: too large'),
      'PEER_PROTOCOL',
      1,
      'the peer 10.0.0.1:13700 refused the measurement: too large',
    ],
    [new ChildCommandError('node x', 3), 'CHILD_FAILED', 1, 'node x exited with 3'],
    [
      new MetricsUnavailableError('http://h:1/metrics', 'HTTP 404'),
      'METRICS_UNAVAILABLE',
      1,
      'metrics at http://h:1/metrics: HTTP 404',
    ],
    [
      new TransportUnavailableError('bench', 'no library'),
      'TRANSPORT_UNAVAILABLE',
      1,
      `bench needs the ucx transport: no library; ${ucxInstallHint}`,
    ],
    [
      new EtcdUnavailableError('demo', 'no etcd executable on PATH'),
      'ETCD_UNAVAILABLE',
      1,
      `demo needs etcd to start a local one for discovery.backend = etcd without discovery.etcd_endpoints: no etcd executable on PATH; ${etcdInstallHint}`,
    ],
  ])('%s: code, exit status and message', (error, code, exitCode, message) => {
    expect(error).toBeInstanceOf(CliError);
    expect(error).toMatchObject({ code, exitCode, message, name: error.constructor.name });
  });

  it('are not on the package entry, as runCli prints them and returns the status; those RankProcesses throws are on /internal beside it', async () => {
    const entry: Record<string, unknown> = await import('./index.js');
    const internal: Record<string, unknown> = await import('./internal.js');
    const classes = Object.entries(errors).flatMap(([name, value]) =>
      typeof value === 'function' && (value === CliError || value.prototype instanceof CliError) ? [name] : [],
    );
    expect(classes).toContain('WatchStoppedError');
    expect(classes.filter((name) => name in entry)).toEqual([]);
    expect(classes.filter((name) => internal[name] === errors[name as keyof typeof errors]).sort()).toEqual([
      'CliError',
      'DemoMessageError',
      'DemoProcessError',
    ]);
  });
});
