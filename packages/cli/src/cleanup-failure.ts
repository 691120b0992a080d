import { messageOf } from '@kvreuse/errors';
import { CleanupFailedError } from './errors.js';

/**
 * What to throw once a step failed with `error` and `undoing` it (`abandoning the publishing`) failed with
 * `cleanupFailure`: `error` itself, keeping `cleanupFailure` as its `cause` (where `error` has a cause of its
 * own, an AggregateError of the two, its own first); or, where `error` cannot keep it (a thrown value that is
 * not an Error, an error frozen or refusing a cause), a `CleanupFailedError` carrying both.
 */
export function keepCleanupFailure(error: unknown, cleanupFailure: unknown, undoing: string): unknown {
  if (error instanceof Error) {
    const cause =
      'cause' in error
        ? new AggregateError(
            [error.cause, cleanupFailure],
            `${messageOf(error.cause)}; and ${undoing} after it failed: ${messageOf(cleanupFailure)}`,
          )
        : cleanupFailure;
    if (Reflect.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true, enumerable: false }))
      return error;
  }
  return new CleanupFailedError(error, cleanupFailure, undoing);
}
