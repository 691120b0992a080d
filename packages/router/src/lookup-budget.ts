import { describeValue, messageOf } from '@kvreuse/errors';

/**
 * Why a decision's lookup clock reading was refused: the clock threw, called back into `decide` while it
 * was read, read something other than a finite number, or read less than it had read before.
 */
export type LookupClockRefusal = 'threw' | 're-entered' | 'not-finite' | 'went-back';
export const lookupClockRefusals: readonly LookupClockRefusal[] = ['threw', 're-entered', 'not-finite', 'went-back'];

/** Why a decision ended as `budget-exceeded` however little time it took: its lookup clock failed. */
export interface LookupFault {
  /** How the clock failed. */
  readonly refusal: LookupClockRefusal;
  /** The same in words, with what it read or threw. */
  readonly detail: string;
}

/**
 * Where the lookup clock reading under way, if any, is kept. A decision started while a lookup clock is read
 * is the clock calling back into `decide`: were it to read its clock, the same clock would start the next
 * decision, with no end. It is kept on `globalThis` under a registered symbol, not in this module, so that
 * every installed copy of this package in the process (npm may install several) sees the others' readings.
 */
const clockReadingKey = Symbol.for('@kvreuse/router/lookup-clock-reading');
const readings = globalThis as { [clockReadingKey]?: { reentered: boolean } | undefined };

const reenteredDetail = 'it called back into decide while being read';

/**
 * One decision's lookup budget, run against its lookup clock. A clock that throws, calls back into `decide`,
 * reads something other than a finite number, or reads less than before spends the budget at once, and
 * `fault` says how it failed: a broken clock must neither stop routing nor leave the lookup without a
 * bound. The decision the clock started reads no clock, and is refused too.
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
    const reading = readings[clockReadingKey];
    if (reading !== undefined) {
      reading.reentered = true;
      this.#failed('re-entered', reenteredDetail);
      this.#started = Number.NaN;
      return;
    }
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
    const thisReading = { reentered: false };
    readings[clockReadingKey] = thisReading;
    try {
      reading = this.#clock();
    } catch (error) {
      if (!thisReading.reentered) {
        this.#failed('threw', `it threw: ${messageOf(error)}`);
        return Number.NaN;
      }
    } finally {
      readings[clockReadingKey] = undefined;
    }
    // A call back into decide is what went wrong, whatever the clock did after it.
    if (thisReading.reentered) this.#failed('re-entered', reenteredDetail);
    else if (typeof reading !== 'number' || !Number.isFinite(reading))
      this.#failed('not-finite', `it read ${describeValue(reading)}, not a finite number of milliseconds`);
    else if (reading < this.#last) this.#failed('went-back', `it went back from ${this.#last} to ${reading} ms`);
    else this.#last = reading;
    return reading as number;
  }

  #failed(refusal: LookupClockRefusal, how: string): void {
    this.fault = { refusal, detail: `the lookup clock (context.clock) failed, ${how}` };
  }
}
