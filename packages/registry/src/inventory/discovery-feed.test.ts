import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test, vi } from 'vitest';
import { MemoryDiscoveryStore } from '../discovery/memory.js';
import { SqliteDiscoveryStore } from '../discovery/sqlite.js';
import type { DiscoveryStore } from '../discovery/types.js';
import type { InventoryEventError } from '../errors.js';
import { hashBlockChain } from './block-hash.js';
import { defaultInventoryPrefix, followInventory, InventoryPublisher } from './discovery-feed.js';
import { RetainedInventory } from './retained-inventory.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-inventory-feed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const stores: [string, () => DiscoveryStore][] = [
  ['memory', () => new MemoryDiscoveryStore()],
  ['sqlite', () => new SqliteDiscoveryStore(join(dir, `${Math.random().toString(36).slice(2)}.db`), { pollIntervalMs: 5 })],
];

describe.each(stores)('inventory through %s discovery', (_, open) => {
  test('followers apply published batches, reject bad ones and forget workers whose lease ended', async () => {
    const store = open();
    const chain = hashBlockChain(Array.from({ length: 64 * 8 }, (_, i) => i), 64);
    const expiresAt = Date.now() + 600_000;
    const leaseA = await store.grantLease(600_000);
    const leaseB = await store.grantLease(600_000);
    const a = new InventoryPublisher(store, { workerId: 'decode-a', incarnation: 'ia', lease: leaseA.id });
    await a.publish([{ type: 'stored', tier: 'gpu', blocks: chain.slice(0, 4), expiresAt }]);

    const inventory = new RetainedInventory();
    const rejected: [string, InventoryEventError][] = [];
    const follower = await followInventory(store, inventory, { onRejected: (key, error) => rejected.push([key, error]) });
    // Loaded from the listing, before any change.
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ workerId: 'decode-a', blocks: 4 }]);

    const b = new InventoryPublisher(store, { workerId: 'decode-b', incarnation: 'ib', lease: leaseB.id });
    await b.publish([{ type: 'stored', tier: 'host', blocks: chain, expiresAt }]);
    await a.publish([{ type: 'stored', tier: 'gpu', blocks: chain.slice(4, 6), expiresAt }]);
    await vi.waitFor(() =>
      expect(inventory.longestRetainedPrefix(chain).map((p) => [p.workerId, p.blocks])).toEqual([
        ['decode-b', 8],
        ['decode-a', 6],
      ]),
    );

    await store.put(`${defaultInventoryPrefix}decode-x`, '{"version":1,"workerId":"decode-x"}');
    await store.put(
      `${defaultInventoryPrefix}decode-y`,
      JSON.stringify({ version: 1, workerId: 'decode-z', incarnation: 'i', seq: 0, events: [] }),
    );
    await vi.waitFor(() => expect(rejected.map(([key, error]) => [key, error.path])).toEqual([
      [`${defaultInventoryPrefix}decode-x`, 'incarnation'],
      [`${defaultInventoryPrefix}decode-y`, 'workerId'],
    ]));

    await store.revokeLease(leaseB.id);
    await vi.waitFor(() => expect(inventory.workers().sort()).toEqual(['decode-a']));
    await follower.close();
    await store.close();
  });
});
