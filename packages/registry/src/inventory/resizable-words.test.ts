import { describe, expect, test } from 'vitest';
import { resizableWords, resizedWords } from './resizable-words.js';

describe('resizable words', () => {
  test('grow in place within the reservation, keeping their words, new words zero', () => {
    const words = resizableWords(4, 16);
    words.set([1, 2, 3, 4]);
    const grown = resizedWords(words, 12, 8);
    expect(grown).toBe(words);
    expect([...grown]).toEqual([1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(grown.buffer.maxByteLength).toBe(64);
  });

  test('past the reservation: a copy reserving headroom times the new length', () => {
    const words = resizableWords(2);
    words.set([7, 8]);
    const grown = resizedWords(words, 5, 4);
    expect(grown).not.toBe(words);
    expect([...grown]).toEqual([7, 8, 0, 0, 0]);
    expect(grown.buffer.maxByteLength).toBe(5 * 4 * 4);
    expect([...words]).toEqual([7, 8]);
  });

  test('shrink in place: the words past the new length are gone, and zero when grown back', () => {
    const words = resizableWords(6, 6);
    words.set([1, 2, 3, 4, 5, 6]);
    expect(resizedWords(words, 2, 8)).toBe(words);
    expect([...words]).toEqual([1, 2]);
    expect(words[4]).toBeUndefined();
    resizedWords(words, 4, 8);
    expect([...words]).toEqual([1, 2, 0, 0]);
  });
});
