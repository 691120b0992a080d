// Typed errors of @kvreuse/endpoint. Each carries a stable `code` and names what was refused.
import type { EndpointState } from './lifecycle.js';
import { describeValue } from '@kvreuse/config';

export type EndpointErrorCode = 'INVALID_ENDPOINT_OPTION' | 'ILLEGAL_ENDPOINT_STATE';

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
