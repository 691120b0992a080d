import type { Clock } from '@kvreuse/drain';

/** A clock that moves only when told to; due timers fire in time order on `advance`. */
export class ManualClock implements Clock {
  #now = 0;
  #timers = new Map<number, { at: number; callback: () => void }>();
  #sequence = 0;

  now(): number {
    return this.#now;
  }

  setTimer(callback: () => void, delayMs: number): unknown {
    const handle = ++this.#sequence;
    this.#timers.set(handle, { at: this.#now + Math.max(0, delayMs), callback });
    return handle;
  }

  clearTimer(handle: unknown): void {
    this.#timers.delete(handle as number);
  }

  /** Armed timers. */
  get pending(): number {
    return this.#timers.size;
  }

  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      let next: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.#timers)
        if (entry[1].at <= target && (next === undefined || entry[1].at < next[1].at)) next = entry;
      if (next === undefined) break;
      this.#timers.delete(next[0]);
      this.#now = Math.max(this.#now, next[1].at);
      next[1].callback();
    }
    this.#now = target;
  }
}
