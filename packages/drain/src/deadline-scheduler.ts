import type { Clock } from './clock.js';
import { InvalidDrainOptionError } from './errors.js';
import { checkClock, checkFunction } from './options.js';

/** A scheduled deadline; `cancel()` is idempotent. */
export interface Deadline {
  readonly at: number;
  cancel(): void;
}

interface Entry {
  readonly at: number;
  readonly sequence: number;
  readonly fire: () => void;
  /** The scheduler's epoch when scheduled; `clear()` starts a new one, cancelling every entry at once. */
  readonly epoch: number;
  cancelled: boolean;
}

/**
 * Every deadline of every operation on ONE timer, armed for the earliest one: a binary min-heap
 * ordered by (time, scheduling order). Cancelled entries are dropped lazily when they reach the top.
 * Due deadlines fire in order; a callback may schedule or cancel others.
 */
export class DeadlineScheduler {
  readonly #clock: Clock;
  readonly #heap: Entry[] = [];
  #sequence = 0;
  #epoch = 0;
  #live = 0;
  #timer: unknown;
  #armedAt: number | undefined;

  constructor(clock: Clock) {
    if (clock === undefined)
      throw new InvalidDrainOptionError('clock', clock, 'a scheduler needs a clock (systemClock, or a manual one)');
    checkClock('clock', clock);
    this.#clock = clock;
  }

  /** Deadlines scheduled and neither fired nor cancelled. */
  get size(): number {
    return this.#live;
  }

  /** The earliest pending deadline's time, if any. */
  get nextAt(): number | undefined {
    this.#dropCancelled();
    return this.#heap[0]?.at;
  }

  schedule(at: number, fire: () => void): Deadline {
    if (typeof at !== 'number' || Number.isNaN(at))
      throw new InvalidDrainOptionError('at', at, 'must be a clock time in milliseconds');
    checkFunction('fire', fire);
    const entry: Entry = { at, sequence: this.#sequence++, fire, epoch: this.#epoch, cancelled: false };
    this.#push(entry);
    this.#live += 1;
    this.#arm();
    return {
      at,
      cancel: () => {
        if (entry.cancelled || entry.epoch !== this.#epoch) return;
        entry.cancelled = true;
        this.#live -= 1;
        if (this.#live === 0) this.#disarm();
      },
    };
  }

  /** Fires every deadline due at the clock's current time (the timer calls this; a manual clock may too). */
  runDue(): void {
    this.#disarm();
    const now = this.#clock.now();
    for (;;) {
      this.#dropCancelled();
      const top = this.#heap[0];
      if (top === undefined || top.at > now) break;
      this.#pop();
      top.cancelled = true;
      this.#live -= 1;
      top.fire();
    }
    this.#arm();
  }

  /** Cancels every pending deadline and the timer, in constant time. */
  clear(): void {
    this.#epoch += 1;
    this.#heap.length = 0;
    this.#live = 0;
    this.#disarm();
  }

  #arm(): void {
    const at = this.nextAt;
    if (at === undefined || at === this.#armedAt) return;
    this.#disarm();
    this.#armedAt = at;
    this.#timer = this.#clock.setTimer(() => {
      this.#timer = undefined;
      this.#armedAt = undefined;
      this.runDue();
    }, at - this.#clock.now());
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#armedAt = undefined;
  }

  #dropCancelled(): void {
    while (this.#heap[0]?.cancelled === true) this.#pop();
  }

  #push(entry: Entry): void {
    const heap = this.#heap;
    heap.push(entry);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!before(entry, heap[parent] as Entry)) break;
      heap[index] = heap[parent] as Entry;
      index = parent;
    }
    heap[index] = entry;
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop();
    if (last === undefined || heap.length === 0) return;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && before(heap[right] as Entry, heap[left] as Entry) ? right : left;
      if (!before(heap[child] as Entry, last)) break;
      heap[index] = heap[child] as Entry;
      index = child;
    }
    heap[index] = last;
  }
}

function before(a: Entry, b: Entry): boolean {
  return a.at < b.at || (a.at === b.at && a.sequence < b.sequence);
}
