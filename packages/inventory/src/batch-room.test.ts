import { describe, expect, it } from 'vitest';
import { checkBatchRoom } from './batch-room.js';
import { InventoryFullError } from './errors.js';
import { RetainedTable } from './retained-table.js';
import type { TableChange } from './table-change.js';

/** `count` distinct hashes as (lo, hi) words, from `first` on. */
function chain(first: number, count: number): Int32Array {
  const words = new Int32Array(2 * count);
  for (let i = 0; i < count; i++) words.set([first + i, 0x5eed], 2 * i);
  return words;
}

const stored = (words: Int32Array, tier: 0 | 1 = 0): TableChange => ({ type: 'store', tier, words, expiry: 1_000 });
const removed = (words: Int32Array, tier: 0 | 1 = 0): TableChange => ({ type: 'remove', tier, words });
const cleared = (tier: 0 | 1): TableChange => ({ type: 'clear', tier });

/** A table of at most 100 blocks and 4 further holders, worker slots 0 to 2 added, with `held` stored for each. */
function tableWith(held: readonly (readonly TableChange[])[]): RetainedTable {
  const table = new RetainedTable(16, 3, 100, 4);
  held.forEach((changes, worker) => {
    table.addWorker(worker);
    for (const change of changes) table.change(worker, change);
  });
  return table;
}

/** What `checkBatchRoom` threw, or undefined. */
function refusal(run: () => void): InventoryFullError | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof InventoryFullError) return error;
    throw error;
  }
  return undefined;
}

/** The table as a refused batch must leave it. */
const stateOf = (table: RetainedTable) => ({
  size: table.size,
  room: table.room,
  furtherHolderRoom: table.furtherHolderRoom,
  indexBytes: table.indexBytes,
});

describe('checkBatchRoom: the most distinct blocks (100 here, 2^27 in the inventory)', () => {
  it('refuses changes that store more new blocks than there is room for, naming the worker and the room, and changes nothing', () => {
    const table = tableWith([[stored(chain(0, 98))]]);
    const before = stateOf(table);
    // Blocks it holds, and a new block named twice, take no room: 98 held + 2 new fit.
    checkBatchRoom(table, 0, [stored(chain(0, 98)), stored(chain(98, 2)), stored(chain(99, 1))], 'w0');
    const refused = refusal(() => checkBatchRoom(table, 0, [stored(chain(90, 10)), stored(chain(100, 1))], 'w0'));
    expect(refused).toMatchObject({ workerId: 'w0', limit: 'blocks', needed: 3, room: 2, most: 100 });
    expect(refused?.message).toBe(
      'retained inventory is full: a batch of worker w0 needs room for 3 more distinct blocks, room is left for 2 of its 100; the batch is refused',
    );
    expect(stateOf(table)).toEqual(before);
  });

  it('counts what a batch removes before it stores: at the ceiling, removing 5 blocks makes room for 5 new ones', () => {
    const table = tableWith([[stored(chain(0, 100))]]);
    const batch = [removed(chain(0, 5)), stored(chain(100, 5))];
    checkBatchRoom(table, 0, batch, 'w0');
    for (const change of batch) table.change(0, change);
    expect(table.room).toBe(0);
    expect(table.size).toBe(100);
  });

  it('refuses whole a batch that stores before it removes, since the table would pass its ceiling in between', () => {
    const table = tableWith([[stored(chain(0, 100))]]);
    const before = stateOf(table);
    const refused = refusal(() => checkBatchRoom(table, 0, [stored(chain(100, 5)), removed(chain(0, 5))], 'w0'));
    expect(refused).toMatchObject({ limit: 'blocks', needed: 5, room: 0 });
    expect(stateOf(table)).toEqual(before);
  });

  it('frees no room for a block removed from one tier while the worker keeps it on the other', () => {
    const table = tableWith([[stored(chain(0, 100))]]);
    const batch = [stored(chain(0, 5), 1), removed(chain(0, 5), 0), stored(chain(100, 1))];
    expect(refusal(() => checkBatchRoom(table, 0, batch, 'w0'))).toMatchObject({ needed: 1, room: 0 });
  });

  it('counts a cleared tier, and a new incarnation (both tiers cleared first), as making room for what follows', () => {
    const table = tableWith([[stored(chain(0, 60)), stored(chain(60, 40), 1)]]);
    checkBatchRoom(table, 0, [cleared(0), stored(chain(100, 60))], 'w0');
    expect(refusal(() => checkBatchRoom(table, 0, [cleared(0), stored(chain(100, 61))], 'w0'))).toMatchObject({
      needed: 1,
      room: 0,
    });
    checkBatchRoom(table, 0, [cleared(0), cleared(1), stored(chain(100, 100))], 'w0');
    // Blocks the batch stored itself are cleared with the rest.
    checkBatchRoom(table, 0, [cleared(0), stored(chain(100, 60)), cleared(0), stored(chain(200, 60))], 'w0');
  });
});

describe('checkBatchRoom: the most further holders (4 here, 2^27 in the inventory)', () => {
  // Worker 0 holds blocks 0–9, worker 1 blocks 0–3 (4 further holders: none is left), worker 2 block 20.
  const full = (): RetainedTable => tableWith([[stored(chain(0, 10))], [stored(chain(0, 4))], [stored(chain(20, 1))]]);

  it('refuses a batch that would hold more workers of blocks others hold than there is room for, and changes nothing', () => {
    const table = full();
    const before = stateOf(table);
    const refused = refusal(() => checkBatchRoom(table, 2, [stored(chain(50, 3)), stored(chain(8, 2))], 'w2'));
    expect(refused).toBeInstanceOf(InventoryFullError);
    expect(refused).toMatchObject({ workerId: 'w2', limit: 'further-holders', needed: 2, room: 0, most: 4 });
    expect(refused?.message).toBe(
      'retained inventory is full: a batch of worker w2 needs room for 2 more further holders (workers retaining ' +
        'a block another worker retains too), room is left for 0 of its 4; the batch is refused',
    );
    expect(stateOf(table)).toEqual(before);
    // A worker the table has no slot for yet counts the same.
    expect(refusal(() => checkBatchRoom(table, undefined, [stored(chain(9, 1))], 'w3'))).toMatchObject({
      limit: 'further-holders',
      needed: 1,
    });
    // New blocks take a distinct block each, and blocks a worker holds already nothing.
    checkBatchRoom(table, 2, [stored(chain(50, 3))], 'w2');
    checkBatchRoom(table, 1, [stored(chain(0, 4), 1)], 'w1');
  });

  it('counts the further holders a batch frees before it adds, the first holder of a shared block leaving included', () => {
    const table = full();
    checkBatchRoom(table, 1, [removed(chain(0, 2)), stored(chain(4, 2))], 'w1');
    expect(refusal(() => checkBatchRoom(table, 1, [stored(chain(4, 2)), removed(chain(0, 2))], 'w1'))).toMatchObject({
      limit: 'further-holders',
      needed: 2,
      room: 0,
    });
    // Worker 0 holds block 0 first: when it leaves, worker 1's entry takes its place and frees an overflow one.
    const batch = [removed(chain(0, 1)), stored(chain(20, 1))];
    checkBatchRoom(table, 0, batch, 'w0');
    for (const change of batch) table.change(0, change);
    expect(table.furtherHolderRoom).toBe(0);
    expect(table.room).toBe(100 - 11);
  });
});
