// Typed errors of @kvreuse/router. Each carries a stable `code` and names the field, option or
// source involved, and the value that was refused.
import { describeValue, KvreuseError } from '@kvreuse/errors';

export type RouterErrorCode =
  'INVALID_ROUTE_REQUEST' | 'INVALID_ROUTER_OPTION' | 'INVALID_RECEIPT' | 'PULL_NOT_STARTED';

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
