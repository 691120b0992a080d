// Listeners the endpoint calls (transitions, evictions, pins held): one that throws never stops the others, and
// is reported as a process warning, as is any other caller's function whose throw the endpoint outlives.
import { messageOf } from '@kvreuse/errors';

/**
 * Calls each of `listeners` with `value`. One that throws is reported as a process warning (`what` names it,
 * e.g. "a transition listener") and the others are called all the same.
 */
export function tellEach<T>(listeners: Iterable<(value: T) => void>, value: T, what: string): void {
  for (const listener of listeners) {
    try {
      listener(value);
    } catch (error) {
      warnOfThrow(what, error);
    }
  }
}

/** Reports `error`, thrown by a caller's function `what` names (e.g. "a transition listener"), as a process warning. */
export function warnOfThrow(what: string, error: unknown): void {
  process.emitWarning(`endpoint: ${what} threw: ${messageOf(error)}`);
}
