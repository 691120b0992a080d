// Typed errors of @kvreuse/cli. Each carries a stable `code` and the exit status the binary ends with:
// 2 for a command line, settings or input file the user has to fix, 1 for a failure while running.
export class CliError extends Error {
    constructor(message, options) {
        super(message, options);
        this.name = new.target.name;
    }
}
/** A command line the command does not take: an unknown option, a missing or extra argument. */
export class UsageError extends CliError {
    command;
    code = 'USAGE';
    exitCode = 2;
    constructor(command, problem) {
        super(`${command}: ${problem} (see kvreuse ${command} --help)`);
        this.command = command;
    }
}
/** A command or subcommand that does not exist; names the closest one when there is one. */
export class UnknownCommandError extends CliError {
    command;
    known;
    code = 'UNKNOWN_COMMAND';
    exitCode = 2;
    constructor(command, known, parent = '') {
        const where = parent === '' ? 'kvreuse' : `kvreuse ${parent}`;
        super(`unknown command ${JSON.stringify(command)} of ${where}: expected one of ${known.join(', ')} (see ${where} --help)`);
        this.command = command;
        this.known = known;
    }
}
/** A file the user named that cannot be read or does not hold what the command expects. */
export class InputFileError extends CliError {
    path;
    code = 'INPUT_FILE';
    exitCode = 2;
    constructor(path, problem, options) {
        super(`${path}: ${problem}`, options);
        this.path = path;
    }
}
/** The SQLite discovery file the settings name does not exist: inspecting it would create an empty one. */
export class DiscoveryNotFoundError extends CliError {
    path;
    code = 'DISCOVERY_NOT_FOUND';
    exitCode = 2;
    constructor(path) {
        super(`discovery.sqlite_path = ${path}: no such file (no worker has published to it; set --discovery-sqlite-path)`);
        this.path = path;
    }
}
/** A command that only runs from a kvreuse repository checkout (bench, demo) was run outside one. */
export class NotACheckoutError extends CliError {
    command;
    from;
    code = 'NOT_A_CHECKOUT';
    exitCode = 1;
    constructor(command, from) {
        super(`${command} runs from a kvreuse repository checkout (git clone https://github.com/kvreuse/kvreuse, then npm run ${command}); ${from} is not inside one`);
        this.command = command;
        this.from = from;
    }
}
/** A command this one delegates to (the benchmark runner, the main job) failed or could not start. */
export class ChildCommandError extends CliError {
    commandLine;
    status;
    code = 'CHILD_FAILED';
    exitCode = 1;
    constructor(commandLine, status) {
        super(`${commandLine} exited with ${status}`);
        this.commandLine = commandLine;
        this.status = status;
    }
}
/** `profiles check`: the profile refuses the facts; the reasons are on stdout. */
export class AdmissionRefusedError extends CliError {
    profile;
    reasons;
    code = 'ADMISSION_REFUSED';
    exitCode = 1;
    constructor(profile, reasons) {
        super(`profile ${profile} refuses these facts (${reasons} reason${reasons === 1 ? '' : 's'})`);
        this.profile = profile;
        this.reasons = reasons;
    }
}
/** A process of the demo failed: it reported a failure, exited, or did not report in time. Carries the last lines of its stderr. */
export class DemoProcessError extends CliError {
    process;
    what;
    stderr;
    code = 'DEMO_PROCESS_FAILED';
    exitCode = 1;
    constructor(process, what, stderr) {
        super(`demo process ${process} ${what}`);
        this.process = process;
        this.what = what;
        this.stderr = stderr;
    }
}
/** A line between the demo's parent and a rank process that is not a well-formed message of the demo: names the field and why. */
export class DemoMessageError extends CliError {
    field;
    why;
    code = 'DEMO_MESSAGE';
    exitCode = 1;
    constructor(field, why) {
        super(`demo message: ${field} ${why}`);
        this.field = field;
        this.why = why;
    }
}
/** A transfer of the demo's own (the turn-1 hand-off) failed. */
export class DemoTransferError extends CliError {
    transfer;
    why;
    code = 'DEMO_TRANSFER';
    exitCode = 1;
    constructor(transfer, why) {
        super(`demo ${transfer} ${why}`);
        this.transfer = transfer;
        this.why = why;
    }
}
/** How to get UCX and a native library built with it: the repository's install script, or the Debian packages by hand. */
export const ucxInstallHint = 'get it with the repository install script (npm run demo or npm run bench installs libucx-dev and ucx-utils, then builds the library) or by hand: sudo apt-get install -y libucx-dev ucx-utils && make -C native';
/** Something a command needs on this machine is missing or does not work: says what, and how to get it. */
class PrerequisiteUnavailableError extends CliError {
    command;
    missing;
    exitCode = 1;
    constructor(command, need, missing, hint, options) {
        super(`${command} needs ${need}: ${missing}; ${hint}`, options);
        this.command = command;
        this.missing = missing;
    }
}
/** The native transport library, or the backend a command needs from it, is not available here. */
export class TransportUnavailableError extends PrerequisiteUnavailableError {
    code = 'TRANSPORT_UNAVAILABLE';
    constructor(command, missing, options) {
        super(command, 'the ucx transport', missing, ucxInstallHint, options);
    }
}
/** How to get etcd for a local discovery, or do without starting one. */
export const etcdInstallHint = 'install it with sudo apt-get install -y etcd-server, or name a running etcd with --discovery-etcd-endpoints <urls>';
/** `demo` on etcd discovery without endpoints starts a local etcd for the run: the `etcd` binary is missing, or it did not start. */
export class EtcdUnavailableError extends PrerequisiteUnavailableError {
    code = 'ETCD_UNAVAILABLE';
    constructor(command, missing, options) {
        super(command, 'etcd to start a local one for discovery.backend = etcd without discovery.etcd_endpoints', missing, etcdInstallHint, options);
    }
}
/** `inspect --metrics <url>`: the endpoint process's metrics could not be read there, or hold no pins gauge. */
export class MetricsUnavailableError extends CliError {
    url;
    code = 'METRICS_UNAVAILABLE';
    exitCode = 1;
    constructor(url, why, options) {
        super(`metrics at ${url}: ${why}`, options);
        this.url = url;
    }
}
