export type { CliContext } from './command.js';
export { interruptCleanups, type SignalledProcess, type WhenInterrupted } from './interrupts.js';
export {
  AdmissionRefusedError,
  ChildCommandError,
  CliError,
  type CliErrorCode,
  DiscoveryNotFoundError,
  InputFileError,
  NotACheckoutError,
  UnknownCommandError,
  UsageError,
} from './errors.js';
export { cliVersion, exitCodeOf, runCli } from './run.js';
export { type InventorySummary, summarizeInventoryBatch } from './inventory-summary.js';
