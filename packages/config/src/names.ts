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

function editDistance(left: string, right: string): number {
  let previous = Array.from({ length: right.length + 1 }, (_, index) => index);
  for (let i = 1; i <= left.length; i++) {
    const current = [i];
    for (let j = 1; j <= right.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (left[i - 1] === right[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    previous = current;
  }
  return previous[right.length] ?? 0;
}

/**
 * The known name closest to `unknown` by edit distance, ignoring case and separators; ties go to the
 * earlier candidate. `undefined` when there are no candidates, or none within `maxDistance` edits.
 */
export function closestName(unknown: string, candidates: Iterable<string>, maxDistance = Number.POSITIVE_INFINITY): string | undefined {
  const target = normalized(unknown);
  let best: { name: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(target, normalized(candidate));
    if (distance <= maxDistance && (best === undefined || distance < best.distance)) best = { name: candidate, distance };
  }
  return best?.name;
}
