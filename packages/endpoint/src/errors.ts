// Typed errors of @kvreuse/endpoint. Each carries a stable `code` and names what was refused.
import { describeValue } from '@kvreuse/config';

export type EndpointErrorCode = 'INVALID_ENDPOINT_OPTION';

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
