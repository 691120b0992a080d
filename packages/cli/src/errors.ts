// Typed errors of @kvreuse/cli. Each carries a stable `code` and the exit status the binary ends with:
// 2 for a command line, settings or input file the user has to fix, 1 for a failure while running.

import { KvreuseError } from '@kvreuse/errors';
export type CliErrorCode =
  | 'ADMISSION_REFUSED'
  | 'SETTINGS_NOT_VALID'
  | 'USAGE'
  | 'UNKNOWN_COMMAND'
  | 'INPUT_FILE'
  | 'NOT_A_CHECKOUT'
  | 'CHILD_FAILED'
  | 'DISCOVERY_NOT_FOUND'
  | 'DEMO_PROCESS_FAILED'
  | 'WATCH_STOPPED'
  | 'DEMO_MESSAGE'
  | 'DEMO_TRANSFER'
  | 'TRANSPORT_UNAVAILABLE'
  | 'ETCD_UNAVAILABLE'
  | 'METRICS_UNAVAILABLE'
  | 'PEER_UNREACHABLE'
  | 'PEER_TIMEOUT'
  | 'PEER_PROTOCOL';

export abstract class CliError extends KvreuseError<CliErrorCode> {
  abstract readonly exitCode: 1 | 2;
}

/** A command line the command does not take: an unknown option, a missing or extra argument. */
export class UsageError extends CliError {
  readonly code = 'USAGE';
  readonly exitCode = 2;
  constructor(
    readonly command: string,
    problem: string,
  ) {
    super(`${command}: ${problem} (see kvreuse ${command} --help)`);
  }
}

/** A command or subcommand that does not exist; names the closest one when there is one. */
export class UnknownCommandError extends CliError {
  readonly code = 'UNKNOWN_COMMAND';
  readonly exitCode = 2;
  constructor(
    readonly command: string,
    readonly known: readonly string[],
    parent = '',
  ) {
    const where = parent === '' ? 'kvreuse' : `kvreuse ${parent}`;
    super(
      `unknown command ${JSON.stringify(command)} of ${where}: expected one of ${known.join(', ')} (see ${where} --help)`,
    );
  }
}

/** A file the user named that cannot be read or does not hold what the command expects. */
export class InputFileError extends CliError {
  readonly code = 'INPUT_FILE';
  readonly exitCode = 2;
  constructor(
    readonly path: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    super(`${path}: ${problem}`, options);
  }
}

/** The SQLite discovery file the settings name does not exist: inspecting it would create an empty one. */
export class DiscoveryNotFoundError extends CliError {
  readonly code = 'DISCOVERY_NOT_FOUND';
  readonly exitCode = 2;
  constructor(readonly path: string) {
    super(`discovery.sqlite_path = ${path}: no such file (no worker has published to it; set --discovery-sqlite-path)`);
  }
}

/**
 * A command that only runs from a kvreuse repository checkout (the benchmark suite) was run outside one;
 * `instead`, when given, says what does the job from the installed package.
 */
export class NotACheckoutError extends CliError {
  readonly code = 'NOT_A_CHECKOUT';
  readonly exitCode = 1;
  constructor(
    readonly command: string,
    readonly from: string,
    instead?: string,
  ) {
    super(
      `${command} runs from a kvreuse repository checkout (git clone https://github.com/kvreuse/kvreuse, then npm run ${command}); ${from} is not inside one` +
        (instead === undefined ? '' : `. ${instead}`),
    );
  }
}

/** A command this one delegates to (the benchmark runner, the main job) failed or could not start. */
export class ChildCommandError extends CliError {
  readonly code = 'CHILD_FAILED';
  readonly exitCode = 1;
  constructor(
    readonly commandLine: string,
    readonly status: number | string,
  ) {
    super(`${commandLine} exited with ${status}`);
  }
}

/** `profiles check`: the profile refuses the facts; the reasons are on stdout. */
export class AdmissionRefusedError extends CliError {
  readonly code = 'ADMISSION_REFUSED';
  readonly exitCode = 1;
  constructor(
    readonly profile: string,
    readonly reasons: number,
  ) {
    super(`profile ${profile} refuses these facts (${reasons} reason${reasons === 1 ? '' : 's'})`);
  }
}

/** `config validate` found problems, and listed each on stdout: the error says how many, not them again. */
export class SettingsNotValidError extends CliError {
  readonly code = 'SETTINGS_NOT_VALID';
  readonly exitCode = 2;
  constructor(
    readonly problems: number,
    options?: ErrorOptions,
  ) {
    super(
      `the settings are not valid: ${problems} problem${problems === 1 ? '' : 's'}, each listed on stdout`,
      options,
    );
  }
}

/** A process of the demo failed: it reported a failure, exited, or did not report in time. Carries the last lines of its stderr. */
export class DemoProcessError extends CliError {
  readonly code = 'DEMO_PROCESS_FAILED';
  readonly exitCode = 1;
  constructor(
    readonly process: string,
    readonly what: string,
    readonly stderr: readonly string[],
  ) {
    super(`demo process ${process} ${what}`);
  }
}

/** A line between the demo's parent and a rank process that is not a well-formed message of the demo: names the field and why. */
export class DemoMessageError extends CliError {
  readonly code = 'DEMO_MESSAGE';
  readonly exitCode = 1;
  constructor(
    readonly field: string,
    readonly why: string,
  ) {
    super(`demo message: ${field} ${why}`);
  }
}

/** Every rank `kvreuse watch` followed stopped on an error it cannot go on from: `failures` says each rank's, as `<worker>: <reason>`. */
export class WatchStoppedError extends CliError {
  readonly code = 'WATCH_STOPPED';
  readonly exitCode = 1;
  constructor(readonly failures: readonly string[]) {
    super(`watch: every rank stopped following: ${failures.join('; ')}`);
  }
}

/** A transfer of the demo's own (the turn-1 hand-off) failed. */
export class DemoTransferError extends CliError {
  readonly code = 'DEMO_TRANSFER';
  readonly exitCode = 1;
  constructor(
    readonly transfer: string,
    readonly why: string,
  ) {
    super(`demo ${transfer} ${why}`);
  }
}

/** How to get UCX and a native library built with it: the repository's install script, or the Debian packages by hand. */
export const ucxInstallHint =
  'get it with the repository install script (npm run demo installs libucx-dev, npm run bench also ucx-utils, then each builds the library) or by hand: sudo apt-get install -y libucx-dev ucx-utils && make -C native';

/** Something a command needs on this machine is missing or does not work: says what, and how to get it. */
abstract class PrerequisiteUnavailableError extends CliError {
  readonly exitCode = 1;
  constructor(
    readonly command: string,
    need: string,
    readonly missing: string,
    hint: string,
    options?: ErrorOptions,
  ) {
    super(`${command} needs ${need}: ${missing}; ${hint}`, options);
  }
}

/** The native transport library, or the backend a command needs from it, is not available here. */
export class TransportUnavailableError extends PrerequisiteUnavailableError {
  readonly code = 'TRANSPORT_UNAVAILABLE';
  constructor(command: string, missing: string, options?: ErrorOptions) {
    super(command, 'the ucx transport', missing, ucxInstallHint, options);
  }
}

/** How to get etcd for a local discovery, or do without starting one. */
export const etcdInstallHint =
  'install it with sudo apt-get install -y etcd-server, or name a running etcd with --discovery-etcd-endpoints <urls>';

/** `demo` on etcd discovery without endpoints starts a local etcd for the run: the `etcd` binary is missing, or it did not start. */
export class EtcdUnavailableError extends PrerequisiteUnavailableError {
  readonly code = 'ETCD_UNAVAILABLE';
  constructor(command: string, missing: string, options?: ErrorOptions) {
    super(
      command,
      'etcd to start a local one for discovery.backend = etcd without discovery.etcd_endpoints',
      missing,
      etcdInstallHint,
      options,
    );
  }
}

/** `inspect --metrics <url>`: the endpoint process's metrics could not be read there, or hold no pins gauge. */
export class MetricsUnavailableError extends CliError {
  readonly code = 'METRICS_UNAVAILABLE';
  readonly exitCode = 1;
  constructor(
    readonly url: string,
    why: string,
    options?: ErrorOptions,
  ) {
    super(`metrics at ${url}: ${why}`, options);
  }
}

/** `bench link --connect`: the listening side cannot be reached (refused until the deadline, no route, no such host). */
export class PeerUnreachableError extends CliError {
  readonly code = 'PEER_UNREACHABLE';
  readonly exitCode = 1;
  constructor(
    readonly peer: string,
    why: string,
    options?: ErrorOptions,
  ) {
    super(`the peer ${peer} cannot be reached: ${why}`, options);
  }
}

/** `bench link`: the other side did not connect, answer or complete a transfer in time. */
export class PeerTimeoutError extends CliError {
  readonly code = 'PEER_TIMEOUT';
  readonly exitCode = 1;
  constructor(
    readonly peer: string,
    readonly what: string,
    readonly timeoutMs: number,
  ) {
    super(`${what} from ${peer} did not come within ${timeoutMs / 1000} s (see --timeout)`);
  }
}

/** `bench link`: the other side sent something that is not the benchmark's exchange, refused it, or went away before the end. */
export class PeerProtocolError extends CliError {
  readonly code = 'PEER_PROTOCOL';
  readonly exitCode = 1;
  constructor(
    readonly peer: string,
    why: string,
    options?: ErrorOptions,
  ) {
    super(`the peer ${peer} ${why}`, options);
  }
}
