import type { Clock } from './clock.js';
import { InvalidDrainOptionError } from './errors.js';
import { checkClock, checkClockTime, checkFunction } from './options.js';

/** A scheduled deadline; `cancel()` is idempotent. */
export interface Deadline {
  readonly at: number;
  cancel(): void;
}

/** What a scheduler's deadlines share: the epoch, the count of live ones and what to do when none is left. */
class Book {
  /** `clear()` starts a new epoch, cancelling every entry of the earlier ones at once. */
  epoch = 0;
  live = 0;

  constructor(readonly onEmpty: () => void) {}
}

/** A heap entry is the deadline handed out: one object per deadline. */
class Entry implements Deadline {
  cancelled = false;

  constructor(
    readonly book: Book,
    readonly at: number,
    readonly sequence: number,
    readonly fire: (subject: unknown) => void,
    /** What `fire` is called with: one shared callback serves many deadlines, no closure each. */
    readonly subject: unknown,
    /** The book's epoch when scheduled. */
    readonly epoch: number,
  ) {}

  cancel(): void {
    const book = this.book;
    if (this.cancelled || this.epoch !== book.epoch) return;
    this.cancelled = true;
    book.live -= 1;
    if (book.live === 0) book.onEmpty();
  }
}

/**
 * Every deadline of every operation on ONE timer, armed for the earliest one: a binary min-heap
 * ordered by (time, scheduling order). Cancelled entries are dropped lazily when they reach the top.
 * Due deadlines fire in order; a callback may schedule or cancel others.
 */
export class DeadlineScheduler {
  readonly #clock: Clock;
  readonly #heap: Entry[] = [];
  // With none live, every entry left in the heap is cancelled: dropping them all now lets their subjects
  // (a whole burst of operations) go at once, not when the next deadline is scheduled.
  readonly #book = new Book(() => {
    this.#disarm();
    this.#heap.length = 0;
  });
  #sequence = 0;
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
    return this.#book.live;
  }

  /** The earliest pending deadline's time, if any. */
  get nextAt(): number | undefined {
    this.#dropCancelled();
    return this.#heap[0]?.at;
  }

  /** Calls `fire(subject)` at `at` (a finite clock time) unless cancelled before. */
  schedule<Subject>(at: number, fire: (subject: Subject) => void, subject: Subject): Deadline;
  schedule(at: number, fire: () => void): Deadline;
  schedule(at: number, fire: (subject: unknown) => void, subject?: unknown): Deadline {
    // An infinite time would keep a timer re-armed for ever, never firing.
    checkClockTime('at', at);
    checkFunction('fire', fire);
    const entry = new Entry(this.#book, at, this.#sequence++, fire, subject, this.#book.epoch);
    this.#push(entry);
    this.#book.live += 1;
    this.#arm();
    return entry;
  }

  /** Fires every deadline due at the clock's current time (the timer calls this; a manual clock may too). */
  runDue(): void {
    this.#disarm();
    const now = this.#clock.now();
    // Armed again even when a callback throws: the deadlines after it still fire (the throw goes on to the caller).
    try {
      for (;;) {
        this.#dropCancelled();
        const top = this.#heap[0];
        if (top === undefined || top.at > now) break;
        this.#pop();
        top.cancelled = true;
        this.#book.live -= 1;
        top.fire(top.subject);
      }
    } finally {
      this.#arm();
    }
  }

  /** Cancels every pending deadline and the timer, in constant time. */
  clear(): void {
    this.#book.epoch += 1;
    this.#heap.length = 0;
    this.#book.live = 0;
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
