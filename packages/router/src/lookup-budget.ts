import { describeValue, messageOf } from '@kvreuse/errors';

/**
 * Why a decision's lookup clock reading was refused: the clock threw, read something other than a finite
 * number, or read less than it had read before.
 */
export type LookupClockRefusal = 'threw' | 'not-finite' | 'went-back';
export const lookupClockRefusals: readonly LookupClockRefusal[] = ['threw', 'not-finite', 'went-back'];

/** Why a decision ended as `budget-exceeded` however little time it took: its lookup clock failed. */
export interface LookupFault {
  /** How the clock failed. */
  readonly refusal: LookupClockRefusal;
  /** The same in words, with what it read or threw. */
  readonly detail: string;
}

/**
 * One decision's lookup budget, run against its lookup clock. A clock that throws, reads something other
 * than a finite number, or reads less than before spends the budget at once, and `fault` says how it
 * failed: a broken clock must neither stop routing nor leave the lookup without a bound.
 */
export class LookupBudget {
  /** How the clock failed; undefined while it works. */
  fault: LookupFault | undefined;
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
      this.#failed('threw', `it threw: ${messageOf(error)}`);
      return Number.NaN;
    }
    if (typeof reading !== 'number' || !Number.isFinite(reading))
      this.#failed('not-finite', `it read ${describeValue(reading)}, not a finite number of milliseconds`);
    else if (reading < this.#last) this.#failed('went-back', `it went back from ${this.#last} to ${reading} ms`);
    else this.#last = reading;
    return reading as number;
  }

  #failed(refusal: LookupClockRefusal, how: string): void {
    this.fault = { refusal, detail: `the lookup clock (context.clock) failed, ${how}` };
  }
}
