import { NativeTransportError } from './errors.js';
import { type AgentContext, HandleState } from './handles.js';
import { check } from './library.js';
import { STATUS_IN_PROGRESS, STATUS_OK, type StatusCodeName, statusCodeName, statusOf } from './status.js';

export type OperationStatus =
  | { readonly state: 'in-progress'; readonly bytesDone: number; readonly bytesTotal: number }
  | { readonly state: 'done'; readonly bytesDone: number; readonly bytesTotal: number }
  | {
      readonly state: 'failed';
      readonly code: StatusCodeName | `UNKNOWN_STATUS_${number}`;
      readonly bytesDone: number;
      readonly bytesTotal: number;
    };

export interface OperationResult {
  /** Bytes the operation moved: the batch's total for a successful one. */
  readonly bytesDone: number;
}

export type CancelOutcome = 'requested' | 'already-terminal';

const ignore = (): void => {};

/** An operation's label, written when asked; made out here so that the closure holds no operation alive. */
const labelWriter =
  (id: bigint, agentName: string): (() => string) =>
  () =>
    `${id} of agent ${agentName}`;

/**
 * One posted batch. It references every region it names until it is terminal; `done` settles when
 * the agent's wake-up reports it (resolving, or rejecting with the NativeTransportError it ended
 * with). Release it with `release()` once terminal.
 */
export class Operation {
  readonly id: bigint;
  readonly descriptorCount: number;
  /** Settles once the operation is terminal. A rejection nobody awaits is not an unhandled rejection. */
  readonly done: Promise<OperationResult>;
  readonly #agent: AgentContext;
  readonly #state: HandleState;
  readonly #onRelease: (operation: Operation) => void;
  #settled = false;
  #awaitingArm = false;
  #resolve!: (result: OperationResult) => void;
  #reject!: (error: Error) => void;

  /** @internal Use agent.post. */
  constructor(agent: AgentContext, id: bigint, descriptorCount: number, onRelease: (operation: Operation) => void) {
    this.#agent = agent;
    this.id = id;
    this.descriptorCount = descriptorCount;
    this.#onRelease = onRelease;
    // Unarmed: a pending operation is held by its agent until its outcome is delivered (armLeakWarning).
    this.#state = new HandleState(this, 'Operation', labelWriter(id, agent.name), { armed: false });
    this.done = new Promise<OperationResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.done.catch(ignore);
  }

  get isOpen(): boolean {
    return this.#state.isOpen;
  }

  /** Whether `done` has settled. */
  get isSettled(): boolean {
    return this.#settled;
  }

  /**
   * @internal Called by the agent for an operation whose outcome it delivered, at its next completion
   * poll: one released by then (the usual case) never pays for the leak warning's registration.
   */
  armLeakWarning(): void {
    this.#awaitingArm = false;
    this.#state.arm(this);
  }

  /** @internal Called by the completion poll that delivered the outcome: the next one arms the warning. */
  markDelivered(): void {
    this.#awaitingArm = true;
  }

  /** @internal Whether the outcome was delivered and the next completion poll has yet to arm the warning. */
  get awaitingArm(): boolean {
    return this.#awaitingArm;
  }

  /** @internal Called by the agent's completion poll (or by release) with the terminal status. */
  settle(status: number, bytesDone: number): void {
    if (this.#settled) return;
    this.#settled = true;
    if (status === STATUS_OK) {
      this.#resolve({ bytesDone });
    } else {
      const code = statusCodeName(status);
      this.#reject(
        new NativeTransportError(
          code,
          status,
          'kvt_agent_poll',
          `operation ${this.id} of agent ${this.#agent.name} ended with ${code} after ${bytesDone} bytes: ${this.#agent.library.api.kvt_strerror(status)}`,
        ),
      );
    }
  }

  status(): OperationStatus {
    const { code, bytesDone, bytesTotal } = this.#read('read an operation status');
    if (code === STATUS_IN_PROGRESS) return { state: 'in-progress', bytesDone, bytesTotal };
    if (code === STATUS_OK) return { state: 'done', bytesDone, bytesTotal };
    return { state: 'failed', code: statusCodeName(code), bytesDone, bytesTotal };
  }

  #read(action: string): { code: number; bytesDone: number; bytesTotal: number } {
    this.#state.assertOpen(action);
    this.#agent.assertOpen(action);
    const status = new Int32Array(1);
    const bytesDone = new BigUint64Array(1);
    const bytesTotal = new BigUint64Array(1);
    const { library } = this.#agent;
    check(
      library,
      'kvt_xfer_status',
      library.api.kvt_xfer_status(this.#agent.id, this.id, status, bytesDone, bytesTotal),
    );
    return { code: status[0] ?? 0, bytesDone: Number(bytesDone[0]), bytesTotal: Number(bytesTotal[0]) };
  }

  /**
   * Asks the backend to stop. `requested`: the operation ends (normally with CANCELED) once nothing of
   * it is in flight any more, and `done` settles then — within about a second whatever the peer does:
   * over UCX, requests still outstanding 200 ms after the cancel are ended by force-closing the
   * endpoint, and the peer is then `disconnected` until its metadata is loaded again.
   * `already-terminal`: nothing changed.
   */
  cancel(): CancelOutcome {
    this.#state.assertOpen('cancel an operation');
    this.#agent.assertOpen('cancel an operation');
    const status = this.#agent.library.api.kvt_xfer_cancel(this.#agent.id, this.id);
    check(this.#agent.library, 'kvt_xfer_cancel', status);
    return status === STATUS_IN_PROGRESS ? 'requested' : 'already-terminal';
  }

  /** Frees the operation's id. Refused with BUSY while it is in progress. */
  release(): void {
    this.#state.assertOpen('release an operation');
    this.#agent.assertOpen('release an operation');
    if (!this.#settled) {
      // The native library reports a terminal operation once, and never after it was released: make
      // sure its outcome reached `done` before letting the id go.
      this.#agent.pollCompletions();
    }
    if (!this.#settled) {
      const { code, bytesDone, bytesTotal } = this.#read('release an operation');
      if (code === STATUS_IN_PROGRESS) {
        throw new NativeTransportError(
          'BUSY',
          statusOf('BUSY'),
          'kvt_xfer_status',
          `operation ${this.id} of agent ${this.#agent.name} is in progress (${bytesDone} of ${bytesTotal} bytes); release it once terminal`,
        );
      }
      this.settle(code, bytesDone);
    }
    check(this.#agent.library, 'kvt_xfer_release', this.#agent.library.api.kvt_xfer_release(this.#agent.id, this.id));
    this.#state.markClosed();
    this.#onRelease(this);
  }
}
