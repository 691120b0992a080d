import { printable } from './printable.js';
import { redactCredentials } from './redact-credentials.js';

/** Longer strings are cut to this many characters (a key or a path can be huge). */
const MAX_STRING_LENGTH = 80;
/** Arrays and objects show this many elements or properties, then how many more they have. */
const MAX_ENTRIES = 16;

/**
 * Renders a value for an error message, as it is: strings quoted (cut at 80 characters; control
 * characters escaped, DEL and C1 included, as `printable` escapes them), bigints with
 * `n` (`5n`), NaN and ±Infinity as themselves (JSON would print `null`), byte arrays by their size
 * (`Uint8Array(16 bytes)`), functions as `a function`, and arrays and objects like JSON with the same
 * rules inside (`{"at":NaN,"blocks":[1n]}`, a property that is `undefined` included), past 16
 * elements or properties the first 16 then how many more (`…(84 more)`). A URL's credentials
 * are shown as `***` (`redactCredentials`). The kvreuse
 * packages' errors render refused input with it.
 */
export function describeValue(value: unknown): string {
  return render(value, []);
}

function render(value: unknown, ancestors: readonly object[]): string {
  if (typeof value === 'string') {
    const shown = redactCredentials(value);
    return quoted(shown.length > MAX_STRING_LENGTH ? `${shown.slice(0, MAX_STRING_LENGTH)}…` : shown);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (typeof value !== 'object' || value === null) return String(value);
  if (ArrayBuffer.isView(value)) return `${value.constructor.name}(${value.byteLength} bytes)`;
  if (ancestors.includes(value)) return '[circular]';
  const inside = [...ancestors, value];
  if (Array.isArray(value)) return `[${shown(value, (element) => render(element, inside))}]`;
  const toJSON: unknown = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return render(toJSON.call(value), inside);
  const keys = Object.keys(value);
  return `{${shown(keys, (key) => `${quoted(key)}:${render((value as Record<string, unknown>)[key], inside)}`)}}`;
}

/** `text` in double quotes, its control characters escaped as JSON escapes them, DEL and C1 included. */
function quoted(text: string): string {
  return printable(JSON.stringify(text));
}

/** The first `MAX_ENTRIES` of `entries` rendered, then how many more there are. */
function shown<T>(entries: readonly T[], renderOne: (entry: T) => string): string {
  const first = entries.slice(0, MAX_ENTRIES).map(renderOne);
  if (entries.length > MAX_ENTRIES) first.push(`…(${entries.length - MAX_ENTRIES} more)`);
  return first.join(',');
}
