// The endpoint's explicit lifecycle: which state it is in, which calls each state allows, and an event for
// every transition, so a caller (and the metrics) always knows where an endpoint stands.
import { EndpointError } from './errors.js';
import { checkFunction } from './argument-shapes.js';
import { tellEach } from './listeners.js';

export type EndpointState =
  | 'created'
  | 'registering'
  | 'registered'
  | 'publishing'
  | 'published'
  | 'ready'
  | 'draining'
  | 'drained'
  | 'closing'
  | 'closed';

/** The states each state may move to. A failed step goes back to where it started, so it can be retried. */
const next: Readonly<Record<EndpointState, readonly EndpointState[]>> = {
  created: ['registering', 'closing'],
  registering: ['registered', 'created'],
  registered: ['publishing', 'draining'],
  publishing: ['published', 'registered'],
  // Readiness comes and goes with the other ranks' parts and the gates.
  published: ['ready', 'draining'],
  ready: ['published', 'draining'],
  draining: ['drained'],
  drained: ['closing'],
  closing: ['closed'],
  closed: [],
};

export const endpointStates = Object.keys(next) as readonly EndpointState[];

export interface EndpointTransition {
  readonly from: EndpointState;
  readonly to: EndpointState;
  /** Why, in words: the call that moved it, or the readiness reason. */
  readonly reason: string;
}

export class EndpointLifecycle {
  #state: EndpointState = 'created';
  readonly #listeners = new Set<(transition: EndpointTransition) => void>();
  /** Transitions made while the listeners were being told of an earlier one, told once it is told to all. */
  readonly #untold: EndpointTransition[] = [];
  #telling = false;

  get state(): EndpointState {
    return this.#state;
  }

  /**
   * Calls `listener` after every transition, in the order they happened (one a listener makes is told once
   * every listener was told the one before); the returned function removes it. A throwing listener is
   * reported as a warning and does not stop the others; one that is no function is refused (`EndpointOptionError`).
   */
  onTransition(listener: (transition: EndpointTransition) => void): () => void {
    checkFunction('listener', listener);
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Throws `EndpointStateError` unless the endpoint is in one of `allowed`: `operation` names the call refused. */
  require(operation: string, allowed: readonly EndpointState[]): void {
    if (!allowed.includes(this.#state)) throw new EndpointStateError(operation, this.#state, allowed);
  }

  /** Moves to `to`; throws `EndpointStateError` (nothing changes) when the current state does not lead there. */
  move(to: EndpointState, reason: string): void {
    const from = this.#state;
    if (!next[from].includes(to))
      throw new EndpointStateError(
        `move to ${to}`,
        from,
        endpointStates.filter((state) => next[state].includes(to)),
      );
    this.#state = to;
    this.#untold.push({ from, to, reason });
    if (this.#telling) return;
    this.#telling = true;
    for (let transition = this.#untold.shift(); transition !== undefined; transition = this.#untold.shift())
      tellEach(this.#listeners, transition, 'a transition listener');
    this.#telling = false;
  }
}

/** A call the endpoint's current state does not allow (e.g. `pull` before `register`, or after `drain`). Nothing was done. */
export class EndpointStateError extends EndpointError {
  readonly code = 'ILLEGAL_ENDPOINT_STATE';
  constructor(
    readonly operation: string,
    readonly state: EndpointState,
    readonly allowed: readonly EndpointState[],
  ) {
    super(
      `${operation} is not allowed while the endpoint is ${state}${allowed.length === 0 ? '' : ` (only while ${allowed.join(', ')})`}`,
    );
  }
}

/**
 * `whenReady()` of an endpoint that cannot become ready without another call: its registration or
 * publication failed (it is `created` or `registered` again), or it drains or closes. `reason` is the
 * transition's reason.
 */
export class EndpointNotReadyError extends EndpointError {
  readonly code = 'ENDPOINT_NOT_READY';
  constructor(
    readonly state: EndpointState,
    readonly reason: string,
  ) {
    super(`the endpoint did not become ready: it is ${state} (${reason})`);
  }
}
