// Typed errors of @kvreuse/drain. Each carries a stable `code` and names the operation, peer, bank,
// setting or option involved, and the value that was refused.
import { causeSuffix, describeValue, KvreuseError } from '@kvreuse/errors';
import { type BankLabel, formatBank } from '@kvreuse/registry';

export type DrainErrorCode =
  | 'DRAINING'
  | 'INVALID_DRAIN_OPTION'
  | 'OPERATION_REFUSED'
  | 'FOREIGN_BANK'
  | 'OPERATION_FAILED'
  | 'OPERATION_TIMED_OUT'
  | 'PEER_FENCED'
  | 'PEER_UNHEALTHY'
  | 'LOAD_FAILED'
  | 'RETRIES_EXHAUSTED';

export abstract class DrainError extends KvreuseError<DrainErrorCode> {}

const show = describeValue;

/**
 * Intake is stopped, and `action` is refused at once: by default because the ledger is draining or shut
 * down; `reason` says what else is closed for a drain when it is not the ledger.
 */
export class DrainingError extends DrainError {
  readonly code = 'DRAINING';
  constructor(
    readonly action: string,
    readonly reason = 'the operation ledger is draining; no new operation is admitted',
  ) {
    super(`cannot ${action}: ${reason}`);
  }
}

/** An option or setting of the drain layer that is out of range. */
export class InvalidDrainOptionError extends DrainError {
  readonly code = 'INVALID_DRAIN_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`${option} = ${show(value)} is refused: ${rule}`);
  }
}

/**
 * An operation was refused before anything was posted: a bank not in service, a local region no
 * bank of the operation covers. Nothing native happened and no reference is held.
 */
export class OperationRefusedError extends DrainError {
  readonly code = 'OPERATION_REFUSED';
  constructor(
    readonly subject: string,
    readonly value: unknown,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`operation refused: ${subject} = ${show(value)}: ${reason}`, options);
  }
}

/**
 * A bank given to `post` that is not the very local region the request names: registered with
 * another agent than the ledger's, or holding another registration whose region id happens to be
 * the same (region ids are per agent). Nothing native happened and no reference is held.
 */
export class ForeignBankError extends DrainError {
  readonly code = 'FOREIGN_BANK';
  constructor(
    /** `banks[i]` or `localRegions[i]`. */
    readonly subject: string,
    readonly bank: BankLabel,
    /** The agent the bank is registered with. */
    readonly bankAgent: string | undefined,
    /** The agent the ledger posts through. */
    readonly ledgerAgent: string,
    readonly regionId: number | undefined,
    readonly reason: string,
  ) {
    super(
      `operation refused: ${subject}: ${formatBank(bank)} (region ${regionId ?? 'none'} of agent ${bankAgent ?? 'none'}) ${reason}`,
    );
  }
}

/** The native layer ended an operation with an error (`nativeCode`: `REMOTE_DISCONNECT`, `CANCELED`, …). */
export class OperationFailedError extends DrainError {
  readonly code = 'OPERATION_FAILED';
  constructor(
    readonly operation: string,
    readonly peer: string,
    readonly nativeCode: string,
    readonly bytesDone: number,
    options?: ErrorOptions,
  ) {
    super(`operation ${operation} with peer ${peer} failed with ${nativeCode} after ${bytesDone} bytes`, options);
  }
}

/**
 * The operation was not complete at `transport.operationTimeoutMs`: its request fails (and
 * recomputes). The operation itself keeps its banks until it is quiescent.
 */
export class OperationTimedOutError extends DrainError {
  readonly code = 'OPERATION_TIMED_OUT';
  constructor(
    readonly operation: string,
    readonly peer: string,
    readonly timeoutMs: number,
    readonly setting: string,
  ) {
    super(`operation ${operation} with peer ${peer} was not complete after ${timeoutMs} ms (${setting}); cancelled`);
  }
}

/**
 * Work prepared for one incarnation or generation of a peer, refused because the peer is now another
 * one (restarted, reloaded or invalidated). It is never redirected to the new peer.
 */
export class PeerFencedError extends DrainError {
  readonly code = 'PEER_FENCED';
  constructor(
    readonly peer: string,
    readonly field: 'incarnation' | 'generation' | 'tracking',
    readonly expected: unknown,
    readonly actual: unknown,
  ) {
    super(
      `peer ${peer}: work prepared for ${field} ${show(expected)} is refused; the peer is now at ${field} ${show(actual)}`,
    );
  }
}

/** The peer was marked unhealthy (disconnect, timeout) and is refused until its metadata is reloaded. */
export class PeerUnhealthyError extends DrainError {
  readonly code = 'PEER_UNHEALTHY';
  constructor(
    readonly peer: string,
    readonly reason: string,
  ) {
    super(`peer ${peer} is unhealthy (${reason}); reload its metadata before using it again`);
  }
}

/** Loading pulled blocks failed and `drain.failedLoadPolicy` is `fail`. */
export class LoadFailedError extends DrainError {
  readonly code = 'LOAD_FAILED';
  constructor(
    readonly blocks: number,
    readonly validPrefix: number,
    readonly reason: string,
  ) {
    super(
      `load of ${blocks} blocks failed (${reason}); ${validPrefix} leading blocks were valid; drain.failedLoadPolicy = "fail"`,
    );
  }
}

/** A retried action failed on every attempt (or with an error that is not safe to retry). */
export class RetriesExhaustedError extends DrainError {
  readonly code = 'RETRIES_EXHAUSTED';
  constructor(
    readonly action: string,
    readonly attempts: number,
    options: ErrorOptions,
  ) {
    const cause = causeSuffix(options.cause);
    super(`${action} failed after ${attempts} attempt${attempts === 1 ? '' : 's'}${cause}`, options);
  }
}
