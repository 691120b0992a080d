export { interruptCleanups } from './interrupts.js';
export { AdmissionRefusedError, ChildCommandError, CliError, DemoMessageError, DemoProcessError, DiscoveryNotFoundError, InputFileError, NotACheckoutError, UnknownCommandError, UsageError, } from './errors.js';
export { cliVersion, exitCodeOf, runCli } from './run.js';
export { summarizeInventoryBatch } from './inventory-summary.js';
// The demo's rank processes, for tools that drive them through faults of their own (tools/chaos).
export { RankProcesses } from './demo/rank-processes.js';
