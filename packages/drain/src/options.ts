// Shape checks of the options that drain functions and constructors take. Each refuses with
// `InvalidDrainOptionError` naming the option.
import { Bank, type RegisteredRank } from '@kvreuse/registry';
import type { Clock } from './clock.js';
import { InvalidDrainOptionError } from './errors.js';

/** Refuses anything but an object (`null`, a number, a string, an array, …) where an options object is expected. */
export function checkOptionsObject<T>(option: string, value: T): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidDrainOptionError(option, value, 'must be an options object');
  }
  return value;
}

export function checkFunction(option: string, value: unknown): void {
  if (typeof value !== 'function') throw new InvalidDrainOptionError(option, value, 'must be a function');
}

export function checkNonEmptyString(option: string, value: unknown): void {
  if (typeof value !== 'string' || value === '')
    throw new InvalidDrainOptionError(option, value, 'must be a non-empty string');
}

/** A time on a drain clock, in milliseconds: a finite number. */
export function checkClockTime(option: string, value: unknown): void {
  if (!Number.isFinite(value))
    throw new InvalidDrainOptionError(option, value, 'must be a finite clock time in milliseconds');
}

/** An optional clock: `now`, `setTimer` and `clearTimer` functions. */
export function checkClock(option: string, clock: Clock | undefined): void {
  if (clock === undefined) return;
  checkOptionsObject(option, clock);
  for (const method of ['now', 'setTimer', 'clearTimer'] as const) checkFunction(`${option}.${method}`, clock[method]);
}

/** An array of registry `Bank`s. */
export function checkBankList(option: string, banks: unknown): asserts banks is readonly Bank[] {
  if (!Array.isArray(banks)) throw new InvalidDrainOptionError(option, banks, 'must be an array of Banks');
  // A loop, not forEach: no closure per call (a ledger checks the banks of every post).
  for (let index = 0; index < banks.length; index++) {
    const bank: unknown = banks[index];
    if (!(bank instanceof Bank))
      throw new InvalidDrainOptionError(`${option}[${index}]`, bank, 'must be a Bank of @kvreuse/registry');
  }
}

/** A `RegisteredRank` as `registerRank` returns it. */
export function checkRegisteredRank(option: string, rank: RegisteredRank): void {
  checkOptionsObject(option, rank);
  for (const field of ['tpRank', 'ppRank'] as const) {
    if (!Number.isSafeInteger(rank[field]) || rank[field] < 0) {
      throw new InvalidDrainOptionError(`${option}.${field}`, rank[field], 'must be a non-negative integer');
    }
  }
  checkBankList(`${option}.banks`, rank.banks);
}
