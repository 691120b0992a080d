import { describe, expect, it } from 'vitest';
import type { OverflowEntries } from './overflow-entries.js';
import { RetainedTable } from './retained-table.js';

/** `count` distinct hashes as (lo, hi) words, from `first` on. */
function chain(first: number, count: number): Int32Array {
  const words = new Int32Array(2 * count);
  for (let i = 0; i < count; i++) words.set([first + i, 0x5eed], 2 * i);
  return words;
}

const store = (table: RetainedTable, worker: number, words: Int32Array): void =>
  table.change(worker, { type: 'store', tier: 0, words, expiry: 1_000 });

describe('RetainedTable at its most blocks (100 here, 2^27 in the inventory)', () => {
  it('grows its slots no further than the most blocks need', () => {
    // Slots grow 19, 29, 44, 66, 99, then to ⌈100 / 0.85⌉ = 118 rather than 149 = ⌈99 × 1.5⌉.
    const table = new RetainedTable(16, 1_000, 100);
    table.addWorker(0);
    store(table, 0, chain(0, 100));
    table.maintain(0, 0); // ends the last growth's move: only the current table is left
    const slotBytes = 6 * 4;
    const overflowBytes = 64 * 3 * 4;
    const recordBytes = 100 * 4 * 4;
    expect(table.indexBytes).toBe(118 * slotBytes + overflowBytes + recordBytes);
  });
});

describe('RetainedTable: its further holders (workers retaining a block beyond its first)', () => {
  it('counts them against their ceiling, and frees one whichever holder of a shared block leaves it', () => {
    const table = new RetainedTable(16, 3, 100, 10);
    for (const worker of [0, 1, 2]) table.addWorker(worker);
    store(table, 0, chain(0, 4));
    expect(table.furtherHolderRoom).toBe(10);
    store(table, 1, chain(0, 4));
    store(table, 2, chain(0, 2));
    expect(table.furtherHolderRoom).toBe(4);
    // Worker 0 holds the blocks' first entries: its leaving frees an overflow entry of each, not a block.
    table.change(0, { type: 'remove', tier: 0, words: chain(0, 4) });
    expect(table.furtherHolderRoom).toBe(8);
    expect(table.room).toBe(96);
    table.releaseWorker(2);
    expect(table.furtherHolderRoom).toBe(10);
    expect(table.size).toBe(4);
  });
});

/** How many overflow entries the table has reserved address space for (its private entries, read for the test's sake). */
const furtherHolderReservation = (table: RetainedTable): number =>
  (table as unknown as { overflow: OverflowEntries }).overflow.words.buffer.maxByteLength / (3 * 4);

/** Each worker's prefix of `words` as [worker, blocks]. */
function prefixes(table: RetainedTable, words: Int32Array): [number, number][] {
  const found: [number, number][] = [];
  table.walk(words, 0, (worker, blocks) => found.push([worker, blocks]));
  return found;
}

describe('RetainedTable: the address space its overflow entries reserve', () => {
  it('never reserves more overflow entries than its ceiling of further holders, up front or as it fills it', () => {
    // 100 further holders: fewer than the 64 entries it starts with plus a step, far fewer than 2^24.
    const table = new RetainedTable(16, 3, 200, 100);
    table.addWorker(0);
    table.addWorker(1);
    store(table, 0, chain(0, 100));
    expect(furtherHolderReservation(table)).toBe(100);
    for (let block = 0; block < 100; block++) {
      store(table, 1, chain(block, 1));
      expect(furtherHolderReservation(table)).toBe(100);
    }
    expect(table.furtherHolderRoom).toBe(0);
  });

  it('past its reservation (64 entries here, 2^24 in the inventory), copies them once, reserving no more than its ceiling', () => {
    const table = new RetainedTable(16, 3, 200, 100, 64);
    table.addWorker(0);
    table.addWorker(1);
    store(table, 0, chain(0, 100));
    store(table, 1, chain(0, 64));
    expect(furtherHolderReservation(table)).toBe(64);
    store(table, 1, chain(64, 36));
    // Eight times the 100 entries it grew to, but its ceiling is 100.
    expect(furtherHolderReservation(table)).toBe(100);
    expect(table.furtherHolderRoom).toBe(0);
    expect(prefixes(table, chain(0, 100))).toEqual([
      [0, 100],
      [1, 100],
    ]);
    table.change(0, { type: 'remove', tier: 0, words: chain(0, 100) });
    expect(prefixes(table, chain(0, 100))).toEqual([[1, 100]]);
    expect(table.furtherHolderRoom).toBe(100);
  });
});
