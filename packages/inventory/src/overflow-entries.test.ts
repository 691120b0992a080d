import { describe, expect, it } from 'vitest';
import { moreNext, moreRecord, moreWords, moreWorker, OverflowEntries } from './overflow-entries.js';

/** Entry `m`'s (worker, record, next) words. */
const entry = (entries: OverflowEntries, m: number): number[] => {
  const at = (m - 1) * moreWords;
  return [entries.words[at + moreWorker]!, entries.words[at + moreRecord]!, entries.words[at + moreNext]!];
};

/** How many entries the words have reserved address space for. */
const reserved = (entries: OverflowEntries): number => entries.words.buffer.maxByteLength / (moreWords * 4);

describe('OverflowEntries', () => {
  it('numbers entries from 1, writes them as given and counts them against their most', () => {
    const entries = new OverflowEntries(10);
    expect(entries.add(3, 7, 0)).toBe(1);
    expect(entries.add(4, 9, 1)).toBe(2);
    expect(entry(entries, 1)).toEqual([3, 7, 0]);
    expect(entry(entries, 2)).toEqual([4, 9, 1]);
    expect(entries.room).toBe(8);
  });

  it('reuses the entry freed last before any other, then takes new ones', () => {
    const entries = new OverflowEntries(10);
    for (let worker = 0; worker < 4; worker++) entries.add(worker, 0, 0);
    entries.release(2);
    entries.release(3);
    expect(entries.room).toBe(8);
    expect(entries.add(8, 1, 0)).toBe(3);
    expect(entries.add(9, 2, 0)).toBe(2);
    expect(entries.add(10, 3, 0)).toBe(5);
    expect(entry(entries, 2)).toEqual([9, 2, 0]);
    expect(entries.room).toBe(5);
  });

  it('grows in place within its reservation, keeping its entries', () => {
    const entries = new OverflowEntries(1_000, 500);
    const words = entries.words;
    for (let m = 1; m <= 65; m++) entries.add(m, m, m - 1);
    expect(entries.words).toBe(words);
    expect(entries.words).toHaveLength(128 * moreWords);
    expect(entry(entries, 64)).toEqual([64, 64, 63]);
    expect(entry(entries, 65)).toEqual([65, 65, 64]);
  });

  it('past its reservation, is copied once into one reserving eight times more, but no more than its most', () => {
    const entries = new OverflowEntries(100, 64);
    for (let m = 1; m <= 64; m++) entries.add(m, m, m - 1);
    const words = entries.words;
    expect(reserved(entries)).toBe(64);
    entries.add(65, 65, 64);
    expect(entries.words).not.toBe(words);
    expect(reserved(entries)).toBe(100);
    for (let m = 1; m <= 65; m++) expect(entry(entries, m)).toEqual([m, m, m - 1]);
  });

  it('never reserves more entries than its most, up front or as it fills it', () => {
    // 100: fewer than the 64 entries it starts with plus a step, far fewer than the 2^24 it reserves by default.
    const entries = new OverflowEntries(100);
    expect(reserved(entries)).toBe(100);
    for (let m = 1; m <= 100; m++) {
      entries.add(0, m, 0);
      expect(reserved(entries)).toBe(100);
    }
    expect(entries.room).toBe(0);
  });
});
