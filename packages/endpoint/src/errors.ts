// Typed errors of @kvreuse/endpoint. Each carries a stable `code` and names what was refused.
import type { FetchReceipt } from './fetch-receipt.js';
import type { EndpointState } from './lifecycle.js';
import { describeValue } from '@kvreuse/config';

export type EndpointErrorCode = 'INVALID_ENDPOINT_OPTION' | 'ILLEGAL_ENDPOINT_STATE' | 'FETCH_SHORTFALL';

export abstract class EndpointError extends Error {
  abstract readonly code: EndpointErrorCode;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An option of the endpoint or one of its parts that is missing, of the wrong shape or out of range. Nothing was started. */
export class EndpointOptionError extends EndpointError {
  readonly code = 'INVALID_ENDPOINT_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`endpoint option ${option} = ${describeValue(value)} is refused: ${rule}`);
  }
}

/** A call the endpoint's current state does not allow (e.g. `fetch` before `register`, or after `drain`). Nothing was done. */
export class EndpointStateError extends EndpointError {
  readonly code = 'ILLEGAL_ENDPOINT_STATE';
  constructor(
    readonly operation: string,
    readonly state: EndpointState,
    readonly allowed: readonly EndpointState[],
  ) {
    super(`${operation} is not allowed while the endpoint is ${state}${allowed.length === 0 ? '' : ` (only while ${allowed.join(', ')})`}`);
  }
}

/**
 * A fetch under the `fail` policy verified fewer blocks than it asked for. The pins were released
 * (or will be, once a quarantined operation turns quiescent); `receipt` says what verified and why the rest did not.
 */
export class FetchShortfallError extends EndpointError {
  readonly code = 'FETCH_SHORTFALL';
  constructor(readonly receipt: FetchReceipt) {
    const first = receipt.recomputed.reasons[0];
    super(`fetch verified ${receipt.blocks} of ${receipt.requested} blocks${first === undefined ? '' : `: ${first.kind} at block ${first.fromBlock}`}`);
  }
}
