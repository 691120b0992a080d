// Values of a command's own options, read the same way by every command.
import type { CommandArgs } from './args.js';
import { UsageError } from './errors.js';

/** The whole number `--<name>` gives (at least `min`, at most `max`), or `fallback` without it; a `UsageError` otherwise. */
export function wholeNumberOption(
  command: string,
  args: CommandArgs,
  name: string,
  fallback: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const text = args.options.get(name)?.[0];
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
    throw new UsageError(command, `--${name} is a whole number ${range}, not ${JSON.stringify(text)}`);
  }
  return value;
}
