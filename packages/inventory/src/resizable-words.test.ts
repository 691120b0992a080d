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

  test('no longer, and reserving no more, than the most words it will need', () => {
    const words = resizableWords(64, 1_000, 10);
    expect(words).toHaveLength(10);
    expect(words.buffer.maxByteLength).toBe(10 * 4);
  });

  test('past the reservation: a copy reserving no more than the most words it will need', () => {
    const words = resizableWords(2);
    const grown = resizedWords(words, 5, 4, 7);
    expect([...grown]).toEqual([0, 0, 0, 0, 0]);
    expect(grown.buffer.maxByteLength).toBe(7 * 4);
  });
});
