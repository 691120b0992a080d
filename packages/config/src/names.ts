import { ConfigArgumentError } from './errors.js';

/** `minimumTransferPrefixBlocks` → `minimum_transfer_prefix_blocks` (the settings-file key). */
export function snakeCase(camel: string): string {
  return camel.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** `minimumTransferPrefixBlocks` → `minimum-transfer-prefix-blocks` (the flag's tail). */
export function kebabCase(camel: string): string {
  return snakeCase(camel).replaceAll('_', '-');
}

/** `minimumTransferPrefixBlocks` → `MINIMUM_TRANSFER_PREFIX_BLOCKS` (the variable's tail). */
export function upperSnakeCase(camel: string): string {
  return snakeCase(camel).toUpperCase();
}

/** Case and separators do not count as typos: `minimumTransferPrefixBlocks` matches `minimum_transfer_prefix_blocks`. */
function normalized(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

/** Names longer than this get no suggestion: no setting is named like that, and distance costs |a| × |b|. */
const LONGEST_SUGGESTIBLE = 128;

function editDistance(left: string, right: string): number {
  let previous = new Int32Array(right.length + 1).map((_, index) => index);
  let current = new Int32Array(right.length + 1);
  for (let i = 1; i <= left.length; i++) {
    current[0] = i;
    for (let j = 1; j <= right.length; j++) {
      const substitution = (previous[j - 1] as number) + (left[i - 1] === right[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, substitution);
    }
    [previous, current] = [current, previous];
  }
  return previous[right.length] as number;
}

/**
 * The known name closest to `unknown` by edit distance, ignoring case and separators; ties go to the
 * earlier candidate. `undefined` when there are no candidates, or none within `maxDistance` edits.
 */
export function closestName(
  unknown: string,
  candidates: Iterable<string>,
  maxDistance = Number.POSITIVE_INFINITY,
): string | undefined {
  const refuse = (argument: string, value: unknown, rule: string): never => {
    throw new ConfigArgumentError('closestName', argument, value, rule);
  };
  if (typeof unknown !== 'string') refuse('unknown', unknown, 'a string');
  if (!isIterable(candidates)) refuse('candidates', candidates, 'an iterable of strings');
  if (typeof maxDistance !== 'number' || !(maxDistance >= 0)) refuse('maxDistance', maxDistance, 'a number ≥ 0');
  const target = normalized(unknown);
  if (target.length > LONGEST_SUGGESTIBLE) return undefined;
  let best: { name: string; distance: number } | undefined;
  for (const candidate of candidates) {
    if (typeof candidate !== 'string') refuse('candidates', candidate, 'an iterable of strings');
    const known = normalized(candidate);
    // The length difference is a lower bound of the distance: a candidate that cannot do better is skipped.
    const bound = Math.abs(known.length - target.length);
    if (bound > maxDistance || (best !== undefined && bound >= best.distance)) continue;
    const distance = editDistance(target, known);
    if (distance <= maxDistance && (best === undefined || distance < best.distance))
      best = { name: candidate, distance };
  }
  return best?.name;
}

function isIterable(value: unknown): value is Iterable<unknown> {
  return value !== null && value !== undefined && typeof (value as Iterable<unknown>)[Symbol.iterator] === 'function';
}
