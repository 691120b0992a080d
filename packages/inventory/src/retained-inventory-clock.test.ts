import { describe, expect, it } from 'vitest';
import type { InventoryBatch } from './events.js';
import { RetainedInventory } from './retained-inventory.js';

const start = 1_700_000_000_000;
const batchOf = (incarnation: string, epoch: number, blocks: bigint[]): InventoryBatch => ({
  workerId: 'w',
  incarnation,
  epoch,
  seq: 0,
  events: [{ type: 'stored', tier: 'gpu', blocks, expiresAt: start + 60_000 }],
});

describe('RetainedInventory.apply reads its clock before it changes anything', () => {
  it('a clock that applies a newer incarnation from inside apply: the older batch is ignored, not merged into it', () => {
    let duringApply: (() => void) | undefined;
    const inventory = new RetainedInventory({
      now: () => {
        const run = duringApply;
        duringApply = undefined;
        run?.();
        return start;
      },
    });
    duringApply = () => inventory.apply(batchOf('w-b', 2, [2n]));
    expect(inventory.apply(batchOf('w-a', 1, [1n]))).toBe(false);
    expect(inventory.longestRetainedPrefix([1n])).toEqual([]);
    expect(inventory.longestRetainedPrefix([2n])).toMatchObject([{ workerId: 'w', incarnation: 'w-b', blocks: 1 }]);
  });

  it('a clock that throws leaves the batch unapplied, so that it applies once the clock works', () => {
    let broken = false;
    const inventory = new RetainedInventory({
      now: () => {
        if (broken) throw new Error('clock unavailable');
        return start;
      },
    });
    broken = true;
    expect(() => inventory.apply({ ...batchOf('w-a', 1, [1n]), complete: true })).toThrow('clock unavailable');
    expect(inventory.completeEpoch('w')).toBeUndefined();
    broken = false;
    expect(inventory.apply(batchOf('w-a', 1, [1n]))).toBe(true);
    expect(inventory.longestRetainedPrefix([1n])).toMatchObject([{ workerId: 'w', blocks: 1 }]);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, undefined])(
    'a clock that later reads %s is refused, typed, before anything changes; the batch applies once it reads a time again',
    (reading) => {
      let broken = false;
      const inventory = new RetainedInventory({ now: () => (broken ? (reading as number) : start) });
      expect(inventory.apply(batchOf('w-a', 1, [1n]))).toBe(true);
      broken = true;
      const refused = expect.objectContaining({ code: 'INVALID_INVENTORY_OPTION', option: 'options.now' });
      expect(() => inventory.apply({ ...batchOf('w-a', 1, [2n]), seq: 1 })).toThrow(refused);
      expect(() => inventory.longestRetainedPrefix([1n])).toThrow(refused);
      expect(() => inventory.prune()).toThrow(refused);
      broken = false;
      expect(inventory.longestRetainedPrefix([1n])).toMatchObject([{ workerId: 'w', blocks: 1 }]);
      expect(inventory.apply({ ...batchOf('w-a', 1, [2n]), seq: 1 })).toBe(true);
      expect(inventory.longestRetainedPrefix([2n])).toMatchObject([{ workerId: 'w', blocks: 1 }]);
    },
  );
});
