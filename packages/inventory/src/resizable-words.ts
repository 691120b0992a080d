/**
 * Int32 arrays that grow in place: a length-tracking view over a resizable `ArrayBuffer`, which
 * reserves address space up front and commits pages as it grows, so growing copies nothing.
 */
export type ResizableWords = Int32Array<ArrayBuffer>;

const bytesPerWord = 4;

/**
 * A zeroed array of `words` words that can grow in place up to `reserveWords`; neither is more than
 * `mostWords` (the most the array will ever need).
 */
export function resizableWords(
  words: number,
  reserveWords: number = words,
  mostWords = Number.POSITIVE_INFINITY,
): ResizableWords {
  const length = Math.min(words, mostWords);
  const reserved = Math.min(Math.max(length, reserveWords), mostWords);
  return new Int32Array(new ArrayBuffer(length * bytesPerWord, { maxByteLength: reserved * bytesPerWord }));
}

/**
 * `array` made `words` long, keeping its first words (new words are zero). In place when the
 * reservation allows (the same array is returned); otherwise a copy whose reservation is
 * `headroom` times the new length, but no more than `mostWords` (the most the array will ever need).
 */
export function resizedWords(
  array: ResizableWords,
  words: number,
  headroom: number,
  mostWords = Number.POSITIVE_INFINITY,
): ResizableWords {
  const buffer = array.buffer;
  if (words * bytesPerWord <= buffer.maxByteLength) {
    buffer.resize(words * bytesPerWord);
    return array;
  }
  const copy = resizableWords(words, Math.ceil(words * headroom), mostWords);
  copy.set(array);
  return copy;
}
