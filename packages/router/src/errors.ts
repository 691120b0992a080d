// Typed errors of @kvreuse/router. Each carries a stable `code` and names the field, option or
// source involved, and the value that was refused.
import { describeValue, KvreuseError } from '@kvreuse/errors';

export type RouterErrorCode =
  | 'INVALID_ROUTE_REQUEST'
  | 'INVALID_ROUTER_OPTION'
  | 'INVALID_RECEIPT'
  | 'INVALID_CALIBRATION_CLOCK'
  | 'PULL_NOT_STARTED';

export abstract class RouterError extends KvreuseError<RouterErrorCode> {}

/** Whether an argument is an object at all (not null, not a primitive), before its fields are read. */
export function isObject(value: unknown): value is object {
  return value !== null && typeof value === 'object';
}

/** A route request of the wrong shape: no chain and no tokens, a negative local prefix, a destination without a descriptor, … */
export class RouteRequestError extends RouterError {
  readonly code = 'INVALID_ROUTE_REQUEST';
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly rule: string,
    options?: ErrorOptions,
  ) {
    super(`route request ${field} = ${describeValue(value)} is refused: ${rule}`, options);
  }
}

/** An option of the router (its context, source book or calibration) that is missing or out of range. */
export class RouterOptionError extends RouterError {
  readonly code = 'INVALID_ROUTER_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`router option ${option} = ${describeValue(value)} is refused: ${rule}`);
  }
}

/** A transfer receipt that cannot calibrate anything: negative time, no blocks, an unknown link class, … Nothing was recorded. */
export class ReceiptError extends RouterError {
  readonly code = 'INVALID_RECEIPT';
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`transfer receipt ${field} = ${describeValue(value)} is refused: ${rule}`);
  }
}

/**
 * Why a calibration's clock reading was refused: the clock threw, called back into the calibration while
 * it was read, read something other than a finite number, or read less than it had read before.
 */
export type CalibrationClockRefusal = 'threw' | 're-entered' | 'not-finite' | 'went-back';
export const calibrationClockRefusals: readonly CalibrationClockRefusal[] = [
  'threw',
  're-entered',
  'not-finite',
  'went-back',
];

/**
 * The clock of a `TransferCalibration` (its `now` option) failed while the calibration read it. Nothing
 * was recorded or aged out: the calibration is as it was before the call.
 */
export class CalibrationClockError extends RouterError {
  readonly code = 'INVALID_CALIBRATION_CLOCK';
  constructor(
    readonly refusal: CalibrationClockRefusal,
    /** What the clock read; undefined when it threw or called back. */
    readonly reading: unknown,
    why: string,
    options?: ErrorOptions,
  ) {
    super(`calibration clock options.now is refused: ${why}; the calibration is unchanged`, options);
  }
}

/** A pull reported ended that the source book never saw start (for that source incarnation). */
export class PullNotStartedError extends RouterError {
  readonly code = 'PULL_NOT_STARTED';
  constructor(
    readonly workerId: string,
    readonly epoch: number,
  ) {
    super(`no pull from source ${workerId} (epoch ${epoch}) is in progress: a pull ends once, after it started`);
  }
}
