import { describe, expect, test } from 'vitest';
import { InventoryFullError } from './errors.js';
import type { InventoryBatch, InventoryEvent } from './events.js';
import { RetainedInventory, type RetainedInventoryOptions, tableCeilings } from './retained-inventory.js';

const now = 1_750_000_000_000;
const expiresAt = now + 60_000;
const expired = now - 1_000;

/** Blocks `from` to `from + count − 1`. */
const blocks = (from: number, count: number) =>
  BigUint64Array.from({ length: count }, (_, i) => 0x5eed_0000n + BigInt(from + i));
const stored = (from: number, count: number, at = expiresAt): InventoryEvent => ({
  type: 'stored',
  tier: 'gpu',
  blocks: blocks(from, count),
  expiresAt: at,
});
/** Incarnation 'a' has epoch 1, 'b' epoch 2. */
const batchOf = (workerId: string, incarnation: string, seq: number, events: InventoryEvent[]): InventoryBatch => ({
  workerId,
  incarnation,
  epoch: incarnation.charCodeAt(0) - 'a'.charCodeAt(0) + 1,
  seq,
  events,
});

/** An inventory of at most 10 blocks and 4 further holders whose worker w0 holds blocks 0–9: no distinct block is left. */
function full(): RetainedInventory {
  const options = { now: () => now, [tableCeilings]: { maxBlocks: 10, maxFurtherHolders: 4 } };
  const inventory = new RetainedInventory(options as RetainedInventoryOptions);
  inventory.apply(batchOf('w0', 'a', 0, [stored(0, 10)]));
  return inventory;
}

/** Each worker's prefix of blocks `from` to `from + 9`. */
const prefixes = (inventory: RetainedInventory, from: number) =>
  inventory
    .longestRetainedPrefix(blocks(from, 10))
    .map(({ workerId, incarnation, blocks: held }) => ({ workerId, incarnation, blocks: held }));

/** What `run` threw, or undefined. */
function refusal(run: () => void): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('RetainedInventory at its ceilings (10 blocks and 4 further holders here, 2^27 of each in the inventory)', () => {
  test('a stored event whose blocks have expired removes them, making room for the blocks stored after it', () => {
    const inventory = full();
    expect(inventory.apply(batchOf('w0', 'a', 1, [stored(0, 5, expired), stored(10, 5)]))).toBe(true);
    expect(prefixes(inventory, 0)).toEqual([]);
    expect(prefixes(inventory, 5)).toEqual([{ workerId: 'w0', incarnation: 'a', blocks: 10 }]);
  });

  test('the expired blocks make no room for what comes before them: the batch is refused whole', () => {
    const inventory = full();
    const refused = refusal(() => inventory.apply(batchOf('w0', 'a', 1, [stored(10, 5), stored(0, 5, expired)])));
    expect(refused).toBeInstanceOf(InventoryFullError);
    expect(refused).toMatchObject({ workerId: 'w0', limit: 'blocks', needed: 5, room: 0, most: 10 });
    expect(prefixes(inventory, 0)).toEqual([{ workerId: 'w0', incarnation: 'a', blocks: 10 }]);
    expect(inventory.size).toBe(10);
  });

  test("a new incarnation's first batch clears the previous one's blocks before it stores, making room for its own", () => {
    const inventory = full();
    const sameIncarnation = batchOf('w0', 'a', 1, [stored(10, 10)]);
    expect(refusal(() => inventory.apply(sameIncarnation))).toMatchObject({ limit: 'blocks', needed: 10, room: 0 });
    expect(inventory.apply(batchOf('w0', 'b', 0, [stored(10, 10)]))).toBe(true);
    expect(prefixes(inventory, 0)).toEqual([]);
    expect(prefixes(inventory, 10)).toEqual([{ workerId: 'w0', incarnation: 'b', blocks: 10 }]);
  });

  test("a new incarnation's first batch frees the previous one's further holders before it takes its own", () => {
    const inventory = full();
    inventory.apply(batchOf('w1', 'a', 0, [stored(0, 4)]));
    const more = batchOf('w1', 'a', 1, [stored(4, 1)]);
    expect(refusal(() => inventory.apply(more))).toMatchObject({ limit: 'further-holders', needed: 1, room: 0 });
    expect(inventory.apply(batchOf('w1', 'b', 0, [stored(4, 4)]))).toBe(true);
    expect(prefixes(inventory, 0)).toEqual([{ workerId: 'w0', incarnation: 'a', blocks: 10 }]);
    expect(prefixes(inventory, 4)).toEqual([
      { workerId: 'w0', incarnation: 'a', blocks: 6 },
      { workerId: 'w1', incarnation: 'b', blocks: 4 },
    ]);
  });
});
