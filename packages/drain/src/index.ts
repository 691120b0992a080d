/**
 * Operation ledger, quiescence, deadlines, quarantine, peer fencing and resilience, and ordered shutdown.
 *
 * @packageDocumentation
 * @module \@kvreuse/drain
 */
export {
  DrainError,
  type DrainErrorCode,
  DrainingError,
  ForeignBankError,
  InvalidDrainOptionError,
  LoadFailedError,
  OperationFailedError,
  OperationRefusedError,
  OperationTimedOutError,
  PeerFencedError,
  PeerUnhealthyError,
  RetriesExhaustedError,
} from './errors.js';
export { type Clock, systemClock } from './clock.js';
export { type Deadline, DeadlineScheduler } from './deadline-scheduler.js';
export { type PeerHealth, PeerBook, type PeerTicket, type TrackedPeer } from './peer-book.js';
export {
  type LedgerAgent,
  type LedgerBlocksRequest,
  type LedgerCounts,
  type LedgerEvents,
  type LedgerOperation,
  type LedgerPostRequest,
  type LedgerTemplate,
  type LedgerTimeouts,
  type NativeOperation,
  OperationLedger,
  type OperationLedgerOptions,
  type OperationOutcome,
  type OperationPhase,
  type PostOptions,
  type QuarantinedOperation,
  type Quiescence,
  type TerminalState,
} from './ledger.js';
export {
  type ClosableAgent,
  DrainController,
  type DrainControllerOptions,
  type DrainEvents,
  type DrainOptions,
  type DrainReport,
  type ReadersOutcome,
  type ReaderWait,
  type ShutdownResult,
  type ShutdownStep,
  type ShutdownStepOutcome,
  type ShutdownStepResult,
  type StepDeadline,
  type WaitForReaders,
} from './drain.js';
export { shutdownOnSignals, type ShutdownSignalOptions, type SignalTarget } from './signals.js';
export { backoffDelay, retry, type RetryOptions } from './retry.js';
export { decideLoad, type FailedLoadPolicy, type LoadDecision, type LoadInput, type LoadPart } from './load-policy.js';
export { drainGroup } from './settings.js';
