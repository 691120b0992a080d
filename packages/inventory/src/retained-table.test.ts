import { describe, expect, it } from 'vitest';
import { InventoryFullError } from './errors.js';
import { RetainedTable } from './retained-table.js';

/** `count` distinct hashes as (lo, hi) words, from `first` on. */
function chain(first: number, count: number): Int32Array {
  const words = new Int32Array(2 * count);
  for (let i = 0; i < count; i++) words.set([first + i, 0x5eed], 2 * i);
  return words;
}

function store(table: RetainedTable, worker: number, words: Int32Array): void {
  for (let i = 0; i < words.length; i += 2) table.store(worker, words[i]!, words[i + 1]!, 0, 1_000);
}

describe('RetainedTable at its most blocks (100 here, 2^27 in the inventory)', () => {
  it('grows its slots no further than the most blocks need', () => {
    // Slots grow 19, 29, 44, 66, 99, then to ⌈100 / 0.85⌉ = 118 rather than 149 = ⌈99 × 1.5⌉.
    const table = new RetainedTable(16, 1_000, 100);
    table.addWorker(0);
    table.reserveRecords(0, 100);
    store(table, 0, chain(0, 100));
    table.maintain(0, 0); // ends the last growth's move: only the current table is left
    const slotBytes = 6 * 4;
    const overflowBytes = 64 * 3 * 4;
    const recordBytes = 100 * 4 * 4;
    expect(table.indexBytes).toBe(118 * slotBytes + overflowBytes + recordBytes);
  });

  it('refuses chains that hold more new blocks than it has room for, naming the worker and the room, and changes nothing', () => {
    const table = new RetainedTable(16, 3, 100);
    table.addWorker(0);
    store(table, 0, chain(0, 98));
    const bytes = table.indexBytes;
    // Blocks it holds, and a new block named twice, take no room: 98 held + 2 new fit.
    table.checkRoom([chain(0, 98), chain(98, 2), chain(99, 1)], 'w1');
    const refused = (): void => table.checkRoom([chain(90, 10), chain(100, 1)], 'w1');
    expect(refused).toThrow(InventoryFullError);
    expect(refused).toThrow(
      'retained inventory is full: a batch of worker w1 stores 3 new distinct blocks, room is left for 2 of its 100; the batch is refused',
    );
    expect(table.size).toBe(98);
    expect(table.room).toBe(2);
    expect(table.indexBytes).toBe(bytes);
  });
});
