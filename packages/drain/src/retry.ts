import { InvalidDrainOptionError, RetriesExhaustedError } from './errors.js';
import { checkFunction, checkOptionsObject } from './options.js';

export interface RetryOptions {
  /** Names the action in errors, e.g. "reload metadata of peer decode-0". */
  readonly action: string;
  /** Most attempts in all (≥ 1). */
  readonly attempts: number;
  /** Backoff before the second attempt; doubles each time up to `maxDelayMs`. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** Whether an error may be retried; others fail at once. */
  readonly retryable: (error: unknown) => boolean;
  /** Uniform in [0, 1); default Math.random. */
  readonly random?: () => number;
  /** Waits `ms`; default a timer. */
  readonly sleep?: (ms: number) => Promise<void>;
  readonly signal?: AbortSignal;
}

/**
 * The delay before attempt `attempt + 1` (attempt ≥ 1): "full jitter" over a capped exponential,
 * uniform in [0, min(maxDelayMs, baseDelayMs × 2^(attempt − 1))).
 */
export function backoffDelay(attempt: number, baseDelayMs: number, maxDelayMs: number, random: () => number): number {
  if (!Number.isSafeInteger(attempt) || attempt < 1)
    throw new InvalidDrainOptionError('attempt', attempt, 'must be an integer ≥ 1');
  checkDelays({ baseDelayMs, maxDelayMs });
  checkFunction('random', random);
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** Math.min(attempt - 1, 52));
  const draw = random();
  if (typeof draw !== 'number' || !(draw >= 0 && draw < 1))
    throw new InvalidDrainOptionError('random()', draw, 'must return a number in [0, 1)');
  return Math.floor(draw * ceiling);
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function checkDelays(delays: Pick<RetryOptions, 'baseDelayMs' | 'maxDelayMs'>): void {
  for (const field of ['baseDelayMs', 'maxDelayMs'] as const) {
    if (!Number.isFinite(delays[field]) || delays[field] < 0) {
      throw new InvalidDrainOptionError(field, delays[field], 'must be a non-negative number of milliseconds');
    }
  }
}

function checkRetryOptions(options: RetryOptions): void {
  checkOptionsObject('options', options);
  if (typeof options.action !== 'string')
    throw new InvalidDrainOptionError('action', options.action, 'must be a string naming the action');
  if (!Number.isSafeInteger(options.attempts) || options.attempts < 1) {
    throw new InvalidDrainOptionError('attempts', options.attempts, 'must be an integer ≥ 1');
  }
  checkDelays(options);
  checkFunction('retryable', options.retryable);
  for (const hook of ['random', 'sleep'] as const) if (options[hook] !== undefined) checkFunction(hook, options[hook]);
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal))
    throw new InvalidDrainOptionError('signal', options.signal, 'must be an AbortSignal');
}

/**
 * Runs `attempt` until it succeeds, with capped exponential backoff and full jitter between tries.
 * Only for actions that are safe to repeat — metadata reloads, pin requests — never for transfers.
 * Fails with `RetriesExhaustedError` (the last error as its cause) when an error is not retryable,
 * the attempts run out, or the signal aborts.
 */
export async function retry<T>(attempt: (index: number) => Promise<T>, options: RetryOptions): Promise<T> {
  checkFunction('attempt', attempt);
  checkRetryOptions(options);
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? defaultSleep;
  const aborted = () => options.signal?.aborted === true;
  for (let index = 1; ; index++) {
    try {
      return await attempt(index);
    } catch (error) {
      const last = index >= options.attempts || !options.retryable(error) || aborted();
      if (last) throw new RetriesExhaustedError(options.action, index, { cause: error });
      await sleep(backoffDelay(index, options.baseDelayMs, options.maxDelayMs, random));
      if (aborted()) throw new RetriesExhaustedError(options.action, index, { cause: options.signal?.reason });
    }
  }
}
