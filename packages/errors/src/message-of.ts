import { describeValue } from './describe-value.js';

/**
 * What was thrown, in words for a message: an Error's `message`, anything else as `String` writes it. It
 * never throws itself: an Error whose `message` cannot be read reads `an error whose message could not be
 * read`, and a value `String` refuses (an object without a prototype, a throwing `toString`) is rendered by
 * `describeValue`.
 */
export function messageOf(thrown: unknown): string {
  let isError = false;
  try {
    isError = thrown instanceof Error;
    return isError ? (thrown as Error).message : String(thrown);
  } catch {
    return isError ? 'an error whose message could not be read' : described(thrown);
  }
}

function described(thrown: unknown): string {
  try {
    return describeValue(thrown);
  } catch {
    return 'a value that could not be put in words';
  }
}

/**
 * `: ` and the message of a cause that is an Error, to end an error's own message with; empty for anything
 * else (no cause, a thrown value that is not an Error).
 */
export function causeSuffix(cause: unknown): string {
  return cause instanceof Error ? `: ${messageOf(cause)}` : '';
}
