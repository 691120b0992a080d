// Typed errors of @kvreuse/engine-events. Every error carries a stable `code` and names what was refused.
import { describeValue as describe, KvreuseError } from '@kvreuse/errors';

/** Every `code` an engine-events error carries. */
export type EngineEventsErrorCode = 'ENGINE_EVENTS_INVALID_INPUT' | 'ENGINE_EVENTS_MALFORMED';

export abstract class EngineEventsError extends KvreuseError<EngineEventsErrorCode> {}

/** An argument or option refused: `argument` names it, `reason` says what it must be. */
export class EngineEventsInputError extends EngineEventsError {
  readonly code = 'ENGINE_EVENTS_INVALID_INPUT';
  constructor(
    readonly argument: string,
    readonly value: unknown,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`engine events: ${argument} = ${describe(value)} is refused: ${reason}`, options);
  }
}

/**
 * An endpoint that is not `tcp://host:port`, `ipc://…` or `inproc://…`, the shapes a rank's endpoint is derived
 * from; `argument` names it (`endpoint`, or `options.endpoint` and `options.replayEndpoint` of
 * `subscribeEngineRanks`).
 */
export class EndpointShapeError extends EngineEventsInputError {
  constructor(argument: string, value: unknown) {
    super(argument, value, 'an endpoint is tcp://host:port, ipc://… or inproc://…');
  }
}

/**
 * A tcp endpoint of rank 0 whose port, plus `rank`, is no port (ports run from 1 to 65535); `argument`
 * names the endpoint (`endpoint`, or `options.replayEndpoint` of `subscribeEngineRanks`).
 */
export class RankPortError extends EngineEventsInputError {
  constructor(
    readonly endpoint: string,
    readonly rank: number,
    argument = 'endpoint',
  ) {
    super(argument, endpoint, `leaves no port for rank ${rank} (rank r follows port + r, from 1 to 65535)`);
  }
}

/** A payload an engine published that is not an event batch: `path` says where it went wrong. */
export class MalformedEngineEventError extends EngineEventsError {
  readonly code = 'ENGINE_EVENTS_MALFORMED';
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`engine event batch malformed at ${path || '(root)'}: ${reason}`);
  }
}
