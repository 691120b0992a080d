import { ConfigArgumentError, isRecord } from './errors.js';

/**
 * The options object of `fn`: absent, or a record of only the `known` options. Anything else is refused
 * with `ConfigArgumentError`, naming the first option it does not take (a misspelt one is never ignored).
 */
export function checkedOptions(
  fn: string,
  options: unknown,
  known: readonly string[],
): Readonly<Record<string, unknown>> {
  const shape = `{ ${known.map((name) => `${name}?`).join(', ')} }`;
  if (options === undefined) return {};
  if (!isRecord(options)) throw new ConfigArgumentError(fn, 'options', options, `undefined or ${shape}`);
  const unknown = Object.keys(options).find((name) => !known.includes(name));
  if (unknown !== undefined)
    throw new ConfigArgumentError(fn, `options.${unknown}`, options[unknown], `left out: the options are ${shape}`);
  return options;
}
