import { KvreuseError } from './kvreuse-error.js';
import { messageOf } from './message-of.js';

/**
 * A step failed with `thrown`, and `undoing` it failed with each of `cleanupFailures`, where `thrown` could not
 * keep them as its cause (a value that is not an Error, an error frozen or refusing a cause). `thrown` is its
 * cause, left as it was. Its `code` is `CLEANUP_FAILED` whatever `thrown`'s was: a caller that branches on the
 * failure's own code matches `codeOf(error.thrown)`.
 */
export class CleanupFailedError extends KvreuseError<'CLEANUP_FAILED'> {
  readonly code = 'CLEANUP_FAILED';
  constructor(
    readonly thrown: unknown,
    readonly undoing: string,
    readonly cleanupFailures: readonly unknown[],
  ) {
    super(`${messageOf(thrown)}; and ${failedAfter(undoing, cleanupFailures)}`, { cause: thrown });
  }
}

/**
 * What to throw once a step failed with `error` and `undoing` it (`closing the agent`) failed with each of
 * `cleanupFailures`: `error` itself, keeping them as its `cause` (one failure and no cause of its own: that
 * failure; else an `AggregateError` of all, its own cause first); or, where `error` cannot keep them, a
 * `CleanupFailedError` carrying both. With no cleanup failure, `error` as it is.
 */
export function keepCleanupFailures(error: unknown, undoing: string, cleanupFailures: readonly unknown[]): unknown {
  if (cleanupFailures.length === 0 || keptAsCause(error, undoing, cleanupFailures)) return error;
  return new CleanupFailedError(error, undoing, cleanupFailures);
}

/** Whether `error` now keeps `cleanupFailures` on its `cause`; false, `error` unchanged, where it cannot. */
function keptAsCause(error: unknown, undoing: string, cleanupFailures: readonly unknown[]): boolean {
  try {
    if (!(error instanceof Error)) return false;
    const hadCause = 'cause' in error;
    const cause =
      !hadCause && cleanupFailures.length === 1
        ? cleanupFailures[0]
        : new AggregateError(
            hadCause ? [error.cause, ...cleanupFailures] : cleanupFailures,
            hadCause
              ? `${messageOf(error.cause)}; and ${failedAfter(undoing, cleanupFailures)}`
              : failedAfter(undoing, cleanupFailures),
          );
    return Reflect.defineProperty(error, 'cause', {
      value: cause,
      writable: true,
      configurable: true,
      enumerable: false,
    });
  } catch {
    // A proxy whose traps throw, or a cause whose getter does: the wrapper keeps it all instead.
    return false;
  }
}

function failedAfter(undoing: string, cleanupFailures: readonly unknown[]): string {
  return `${undoing} after it failed: ${cleanupFailures.map(messageOf).join('; ')}`;
}
