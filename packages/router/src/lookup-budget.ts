import { describeValue } from '@kvreuse/errors';

/**
 * One decision's lookup budget, run against its lookup clock. A clock that throws, reads something other
 * than a finite number, or reads less than before spends the budget at once, and `fault` says how it
 * failed: a broken clock must neither stop routing nor leave the lookup without a bound.
 */
export class LookupBudget {
  /** How the clock failed, in words; undefined while it works. */
  fault: string | undefined;
  readonly #clock: () => number;
  #last = Number.NEGATIVE_INFINITY;
  readonly #started: number;

  constructor(
    clock: () => number,
    /** `router.transfer_source_lookup_budget_ms`. */
    readonly budgetMs: number,
  ) {
    this.#clock = clock;
    this.#started = this.#read();
  }

  /** Whether more than the budget has passed since the start, or the clock has failed. */
  spent(): boolean {
    if (this.fault !== undefined) return true;
    const elapsed = this.#read() - this.#started;
    return this.fault !== undefined || elapsed > this.budgetMs;
  }

  #read(): number {
    let reading: unknown;
    try {
      reading = this.#clock();
    } catch (error) {
      this.fault = `it threw: ${error instanceof Error ? error.message : String(error)}`;
      return Number.NaN;
    }
    if (typeof reading !== 'number' || !Number.isFinite(reading))
      this.fault = `it read ${describeValue(reading)}, not a finite number of milliseconds`;
    else if (reading < this.#last) this.fault = `it went back from ${this.#last} to ${reading} ms`;
    else this.#last = reading;
    return reading as number;
  }
}
