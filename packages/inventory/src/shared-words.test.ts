import { describe, expect, test } from 'vitest';
import { sharedWords } from './shared-words.js';

describe('sharedWords', () => {
  test('a zeroed array of that many words, each on a buffer of its own', () => {
    const words = sharedWords(6);
    expect(words).toBeInstanceOf(Int32Array);
    expect(words.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect([...words]).toEqual([0, 0, 0, 0, 0, 0]);
    words[5] = -7;
    expect(sharedWords(6)[5]).toBe(0);
    expect(words[5]).toBe(-7);
  });
});
