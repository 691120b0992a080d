import { describe, expect, it } from 'vitest';
import type { InventoryBatch, InventoryEvent } from './events.js';
import { RetainedInventory } from './retained-inventory.js';

const now = 1_750_000_000_000;
const expiresAt = now + 60_000;

/** Blocks `from` to `from + count − 1`. */
const blocks = (from: number, count: number) =>
  BigUint64Array.from({ length: count }, (_, i) => 0x7e57_0000n + BigInt(from + i));
const stored = (from: number, count: number): InventoryEvent => ({
  type: 'stored',
  tier: 'gpu',
  blocks: blocks(from, count),
  expiresAt,
});
const batchOf = (workerId: string, events: InventoryEvent[]): InventoryBatch => ({
  workerId,
  incarnation: `${workerId}-a`,
  epoch: 1,
  seq: 0,
  events,
});

/** Each worker's prefix of blocks `from` to `from + count − 1`, as [workerId, blocks]. */
const prefixes = (inventory: RetainedInventory, from: number, count: number) =>
  inventory.longestRetainedPrefix(blocks(from, count)).map(({ workerId, blocks: held }) => [workerId, held]);

describe('RetainedInventory.apply, called from inside another apply', () => {
  it("gathers the inner batch's changes apart from the outer one's: each worker gets its own blocks, all of them", () => {
    const inventory = new RetainedInventory({ now: () => now });
    // The event's expiresAt is read once when the batch is checked and again when its change is made:
    // the second read, with the outer batch's first change already gathered, applies another worker's batch.
    let reads = 0;
    const applyingEvent: InventoryEvent = {
      type: 'stored',
      tier: 'gpu',
      blocks: blocks(10, 4),
      get expiresAt() {
        if (++reads === 2) expect(inventory.apply(batchOf('w1', [stored(20, 4)]))).toBe(true);
        return expiresAt;
      },
    };
    expect(inventory.apply(batchOf('w0', [stored(0, 4), applyingEvent]))).toBe(true);
    expect(reads).toBe(2);
    expect(prefixes(inventory, 0, 4)).toEqual([['w0', 4]]);
    expect(prefixes(inventory, 10, 4)).toEqual([['w0', 4]]);
    expect(prefixes(inventory, 20, 4)).toEqual([['w1', 4]]);
    expect(inventory.size).toBe(12);
  });
});
