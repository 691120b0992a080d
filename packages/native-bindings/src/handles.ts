import { HandleClosedError, type HandleKind } from './errors.js';
import type { NativeLibrary } from './library.js';

/** What a handle needs of the agent it belongs to. */
export interface AgentContext {
  readonly library: NativeLibrary;
  /** The native agent id. */
  readonly id: number;
  readonly name: string;
  /** Throws HandleClosedError when the agent is closed. */
  assertOpen(action: string): void;
  /** Dequeues every completed operation now and settles their `done` promises. */
  pollCompletions(): void;
  /**
   * Begins a memory job on the agent's thread (`begin` is a `kvt_mem_*_begin` call writing the job id):
   * throws the refusal naming `call`, else returns a promise of the job's outcome.
   */
  beginMemoryJob(call: string, begin: (outJob: BigUint64Array) => number): Promise<void>;
}

/**
 * Warns about handles that were dropped without being closed. It never frees anything: native state
 * is released only by explicit calls, because only the caller knows when memory is quiescent.
 */
const leaks = new FinalizationRegistry<HandleState>((state) => {
  process.emitWarning(
    `${state.kind} ${state.label} was garbage-collected without being closed; its native state stays until the process exits`,
    {
      code: 'KVREUSE_LEAKED_HANDLE',
    },
  );
});

/** Open/closed state of one handle, with the leak warning armed while it is open (see `arm`). */
export class HandleState {
  readonly kind: HandleKind;
  /** The label, or what writes it when first asked (a handle made per operation should not pay for it). */
  #label: string | (() => string);
  #open = true;
  #armed = false;

  /** `armed: false` leaves the leak warning to `arm()`, for a handle that cannot leak before some point. */
  constructor(owner: object, kind: HandleKind, label: string | (() => string), { armed = true } = {}) {
    this.kind = kind;
    this.#label = label;
    if (armed) this.arm(owner);
  }

  /** Arms the leak warning for `owner` (the handle this state belongs to) while it is open. */
  arm(owner: object): void {
    if (!this.#open || this.#armed) return;
    this.#armed = true;
    leaks.register(owner, this, this);
  }

  get isOpen(): boolean {
    return this.#open;
  }

  get label(): string {
    if (typeof this.#label === 'function') this.#label = this.#label();
    return this.#label;
  }

  assertOpen(action: string): void {
    if (!this.#open) throw new HandleClosedError(this.kind, this.label, action);
  }

  markClosed(): void {
    this.#open = false;
    if (this.#armed) leaks.unregister(this);
  }
}

/** Accepts a non-negative safe integer or bigint byte count/address; returns it as bigint. */
export function toUint64(value: number | bigint): bigint | undefined {
  if (typeof value === 'bigint') return value >= 0n && value < 1n << 64n ? value : undefined;
  return Number.isSafeInteger(value) && value >= 0 ? BigInt(value) : undefined;
}
