import { describe, expect, it } from 'vitest';
import { MemoryDiscoveryStore } from '@kvreuse/discovery';
import { defaultInventoryPrefix, followInventory, type InventoryFollower } from './discovery-feed.js';
import { encodeInventoryBatch } from './events.js';
import { RetainedInventory } from './retained-inventory.js';

const batch = (workerId: string, complete: boolean) => ({
  type: 'put' as const,
  key: `${defaultInventoryPrefix}${workerId}`,
  value: encodeInventoryBatch({ workerId, incarnation: `${workerId}-a`, epoch: 1, seq: 0, events: [], complete }),
});

describe('followInventory, closed from its own callback', () => {
  it('applies nothing and calls back no more once a callback closed it, even within one notice: no later put, no later delete', async () => {
    const store = new MemoryDiscoveryStore();
    await store.commit([batch('w0', false)]);
    const inventory = new RetainedInventory();
    const completed: string[] = [];
    let follower: InventoryFollower | undefined;
    let closing: Promise<void> | undefined;
    let firstCallback!: () => void;
    const called = new Promise<void>((resolve) => (firstCallback = resolve));
    follower = await followInventory(store, inventory, {
      onComplete: ({ workerId }) => {
        completed.push(workerId);
        closing ??= follower?.close();
        firstCallback();
      },
    });
    await store.commit([batch('w1', true), batch('w2', true), { type: 'delete', key: `${defaultInventoryPrefix}w0` }]);
    await called;
    await closing;
    expect(completed).toEqual(['w1']);
    expect(inventory.workers()).toEqual(['w0', 'w1']);
    await store.close();
  });
});
