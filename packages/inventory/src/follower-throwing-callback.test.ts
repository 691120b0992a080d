import { describe, expect, it, vi } from 'vitest';
import { MemoryDiscoveryStore } from '@kvreuse/discovery';
import { defaultInventoryPrefix, followInventory } from './discovery-feed.js';
import { encodeInventoryBatch } from './events.js';
import { RetainedInventory } from './retained-inventory.js';

const batch = (workerId: string) => ({
  type: 'put' as const,
  key: `${defaultInventoryPrefix}${workerId}`,
  value: encodeInventoryBatch({ workerId, incarnation: `${workerId}-a`, epoch: 1, seq: 0, events: [], complete: true }),
});

describe('followInventory, with a callback that throws', () => {
  it('reports the throw as a process warning and applies the rest of the notice all the same', async () => {
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      const store = new MemoryDiscoveryStore();
      const inventory = new RetainedInventory();
      const completed: string[] = [];
      let w3Complete!: () => void;
      const w3 = new Promise<void>((resolve) => (w3Complete = resolve));
      const follower = await followInventory(store, inventory, {
        onComplete: ({ workerId }) => {
          completed.push(workerId);
          if (workerId === 'w3') w3Complete();
          if (workerId === 'w1') throw new Error('dashboard unavailable');
        },
      });
      await store.commit([batch('w1'), batch('w2')]);
      // A later notice: once it is handled, the one before it was handled to its end.
      await store.commit([batch('w3')]);
      await w3;
      expect(completed).toEqual(['w1', 'w2', 'w3']);
      expect(inventory.workers()).toEqual(['w1', 'w2', 'w3']);
      expect(warnings).toHaveBeenCalledWith(
        'inventory: options.onComplete of followInventory threw: dashboard unavailable',
      );
      await follower.close();
      await store.close();
    } finally {
      warnings.mockRestore();
    }
  });
});
