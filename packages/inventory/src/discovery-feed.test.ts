import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test, vi } from 'vitest';
import {
  claimIncarnationEpoch,
  type DiscoveryStore,
  MemoryDiscoveryStore,
  SqliteDiscoveryStore,
  SupersededError,
} from '@kvreuse/discovery';
import { type InventoryEventError, InventoryWithdrawnError } from './errors.js';
import { hashBlockChain } from './block-hash.js';
import { type InventoryEvent, safeParseInventoryBatch } from './events.js';
import { defaultInventoryPrefix, followInventory, InventoryPublisher } from './discovery-feed.js';
import { RetainedInventory } from './retained-inventory.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-inventory-feed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const stores: [string, () => DiscoveryStore][] = [
  ['memory', () => new MemoryDiscoveryStore()],
  [
    'sqlite',
    () => new SqliteDiscoveryStore(join(dir, `${Math.random().toString(36).slice(2)}.db`), { pollIntervalMs: 5 }),
  ],
];

test('publishers and followers refuse arguments of the wrong shape, naming the argument', async () => {
  const store = new MemoryDiscoveryStore();
  const option = (name: string) => expect.objectContaining({ code: 'INVALID_INVENTORY_OPTION', option: name });
  expect(() => new InventoryPublisher(store, { workerId: 'w', incarnation: 'i' } as never)).toThrow(
    option('options.lease'),
  );
  expect(
    () => new InventoryPublisher(undefined as never, { workerId: 'w', incarnation: 'i', epoch: 1, lease: 'l' }),
  ).toThrow(option('store'));
  // A worker id or incarnation that cannot name a discovery key: every publish, or every follower, would refuse.
  expect(() => new InventoryPublisher(store, { workerId: 'decode/0', incarnation: 'i', epoch: 1, lease: 'l' })).toThrow(
    expect.objectContaining({ code: 'INVALID_INVENTORY_OPTION', option: 'options.workerId', value: 'decode/0' }),
  );
  expect(
    () => new InventoryPublisher(store, { workerId: 'w', incarnation: 'i'.repeat(300), epoch: 1, lease: 'l' }),
  ).toThrow(option('options.incarnation'));
  await expect(followInventory(store, {} as never)).rejects.toThrow(option('inventory'));
  await expect(followInventory(store, new RetainedInventory(), { onRejected: true } as never)).rejects.toThrow(
    option('options.onRejected'),
  );
  await expect(followInventory(store, new RetainedInventory(), { onComplete: 1 } as never)).rejects.toThrow(
    option('options.onComplete'),
  );
  // An empty prefix would take every key of the store for a worker's inventory.
  await expect(followInventory(store, new RetainedInventory(), { prefix: '' })).rejects.toThrow(
    option('options.prefix'),
  );
  expect(
    () => new InventoryPublisher(store, { workerId: 'w', incarnation: 'i', epoch: 1, lease: 'l', prefix: '' }),
  ).toThrow(option('options.prefix'));
  const publisher = new InventoryPublisher(store, { workerId: 'w', incarnation: 'i', epoch: 1, lease: 'l' });
  await expect(publisher.publish([], { complete: 'yes' } as never)).rejects.toThrow(option('options.complete'));
  expect(publisher.complete).toBe(false);
  await store.close();
});

test('publish() refuses events every follower would refuse, writing nothing, and writes a fractional expiry in whole ms', async () => {
  const store = new MemoryDiscoveryStore();
  const lease = await store.grantLease(600_000);
  const claim = await claimIncarnationEpoch(store, { workerId: 'w', incarnation: 'i' });
  const publisher = new InventoryPublisher(store, { ...claim, lease: lease.id });
  const expiresAt = Date.now() + 600_000;
  await publisher.publish([{ type: 'stored', tier: 'gpu', blocks: [1n], expiresAt }]);
  const published = await store.get(publisher.key);
  const refused = (path: string) => expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT', path });
  await expect(
    publisher.publish([{ type: 'stored', tier: 'gpu', blocks: [1n], expiresAt: expiresAt / 1000 }]),
  ).rejects.toThrow(refused('events.0.expiresAt'));
  await expect(publisher.publish([{ type: 'removed', tier: 'gpu', blocks: [-1n] }])).rejects.toThrow(
    refused('events.0.blocks.0'),
  );
  await expect(publisher.publish([{ type: 'cleared', tier: 'GPU' as never }])).rejects.toThrow(
    refused('events.0.tier'),
  );
  await expect(publisher.publish('gpu' as never)).rejects.toThrow(refused('events'));
  // A hole in a sparse array is no event either (forEach would skip it, and the wire would read null).
  const sparse: InventoryEvent[] = [{ type: 'cleared', tier: 'gpu' }];
  sparse.length = 2;
  await expect(publisher.publish(sparse)).rejects.toThrow(refused('events.1'));
  expect(await store.get(publisher.key)).toEqual(published);
  await publisher.publish([{ type: 'stored', tier: 'gpu', blocks: [1n], expiresAt: expiresAt + 0.5 }]);
  const written = await store.get(publisher.key);
  expect(safeParseInventoryBatch(written!.value)).toMatchObject({
    success: true,
    data: { seq: 1, events: [{ type: 'stored', expiresAt }] },
  });
  await publisher.publish([{ type: 'stored', tier: 'gpu', blocks: [1n], expiresAt: 1e20 }]);
  expect(safeParseInventoryBatch((await store.get(publisher.key))!.value)).toMatchObject({
    success: true,
    data: { events: [{ expiresAt: Number.MAX_SAFE_INTEGER }] },
  });
  await store.close();
});

test('a publisher publishes as the worker it was made for, whatever the caller does with its options afterwards', async () => {
  const store = new MemoryDiscoveryStore();
  const lease = await store.grantLease(600_000);
  const options = { ...(await claimIncarnationEpoch(store, { workerId: 'w', incarnation: 'i' })), lease: lease.id };
  const publisher = new InventoryPublisher(store, options);
  Object.assign(options, { workerId: 'other', incarnation: '', epoch: Number.NaN });
  await publisher.publish([]);
  expect(safeParseInventoryBatch((await store.get(publisher.key))!.value)).toMatchObject({
    success: true,
    data: { workerId: 'w', incarnation: 'i', epoch: 1 },
  });
  await store.close();
});

describe.each(stores)('inventory through %s discovery', (_, open) => {
  test("withdraw() deletes this incarnation's batch (followers forget the worker), leaves a newer one, and refuses later batches", async () => {
    const store = open();
    const chain = hashBlockChain(
      Array.from({ length: 64 * 4 }, (_, i) => i),
      { salt: 1n, blockTokens: 64 },
    );
    const expiresAt = Date.now() + 600_000;
    const lease = await store.grantLease(600_000);
    const inventory = new RetainedInventory();
    const follower = await followInventory(store, inventory);
    const claim = (workerId: string, incarnation: string) => claimIncarnationEpoch(store, { workerId, incarnation });
    const old = new InventoryPublisher(store, { ...(await claim('decode-w', 'old')), lease: lease.id });
    await old.publish([{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }]);
    await vi.waitFor(() => expect(inventory.workers()).toEqual(['decode-w']));

    expect(await old.withdraw()).toBe(true);
    expect(await store.get(old.key)).toBeUndefined();
    await vi.waitFor(() => expect(inventory.workers()).toEqual([]));
    await expect(old.publish([{ type: 'cleared', tier: 'gpu' }])).rejects.toThrow(InventoryWithdrawnError);
    await expect(old.publish([])).rejects.toMatchObject({
      code: 'INVENTORY_WITHDRAWN',
      workerId: 'decode-w',
      incarnation: 'old',
    });

    // A batch still being written when withdraw() is called is written first, then deleted.
    const racing = new InventoryPublisher(store, { ...(await claim('decode-r', 'r')), lease: lease.id });
    const write = racing.publish([{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }]);
    expect(await racing.withdraw()).toBe(true);
    expect(await write).toBeGreaterThan(0);
    expect(await store.get(racing.key)).toBeUndefined();

    const stale = new InventoryPublisher(store, { ...(await claim('decode-w', 'stale')), lease: lease.id });
    const fresh = new InventoryPublisher(store, { ...(await claim('decode-w', 'new')), lease: lease.id });
    await fresh.publish([{ type: 'stored', tier: 'host', blocks: chain, expiresAt }]);
    expect(await stale.withdraw()).toBe(false);
    expect((await store.get(fresh.key))?.value).toBeDefined();
    await vi.waitFor(() =>
      expect(inventory.longestRetainedPrefix(chain)).toMatchObject([
        { workerId: 'decode-w', incarnation: 'new', hostBlocks: 4 },
      ]),
    );
    await follower.close();
    await store.close();
  });

  test('followers apply published batches, reject bad ones and forget workers whose lease ended', async () => {
    const store = open();
    const chain = hashBlockChain(
      Array.from({ length: 64 * 8 }, (_, i) => i),
      { salt: 1n, blockTokens: 64 },
    );
    const expiresAt = Date.now() + 600_000;
    const leaseA = await store.grantLease(600_000);
    const leaseB = await store.grantLease(600_000);
    const { epoch: epochA } = await claimIncarnationEpoch(store, { workerId: 'decode-a', incarnation: 'ia' });
    const a = new InventoryPublisher(store, {
      workerId: 'decode-a',
      incarnation: 'ia',
      epoch: epochA,
      lease: leaseA.id,
    });
    await a.publish([{ type: 'stored', tier: 'gpu', blocks: chain.slice(0, 4), expiresAt }]);

    const inventory = new RetainedInventory();
    const rejected: [string, InventoryEventError][] = [];
    const follower = await followInventory(store, inventory, {
      onRejected: (key, error) => rejected.push([key, error]),
    });
    // Loaded from the listing, before any change.
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ workerId: 'decode-a', blocks: 4 }]);

    const { epoch: epochB } = await claimIncarnationEpoch(store, { workerId: 'decode-b', incarnation: 'ib' });
    const b = new InventoryPublisher(store, {
      workerId: 'decode-b',
      incarnation: 'ib',
      epoch: epochB,
      lease: leaseB.id,
    });
    await b.publish([{ type: 'stored', tier: 'host', blocks: chain, expiresAt }]);
    await a.publish([{ type: 'stored', tier: 'gpu', blocks: chain.slice(4, 6), expiresAt }]);
    await vi.waitFor(() =>
      expect(inventory.longestRetainedPrefix(chain).map((p) => [p.workerId, p.blocks])).toEqual([
        ['decode-b', 8],
        ['decode-a', 6],
      ]),
    );

    await store.put(`${defaultInventoryPrefix}decode-x`, '{"version":2,"workerId":"decode-x"}');
    await store.put(
      `${defaultInventoryPrefix}decode-y`,
      JSON.stringify({ version: 2, workerId: 'decode-z', incarnation: 'i', epoch: 1, seq: 0, events: [] }),
    );
    await vi.waitFor(() =>
      expect(rejected.map(([key, error]) => [key, error.path])).toEqual([
        [`${defaultInventoryPrefix}decode-x`, 'incarnation'],
        [`${defaultInventoryPrefix}decode-y`, 'workerId'],
      ]),
    );

    await store.revokeLease(leaseB.id);
    await vi.waitFor(() => expect(inventory.workers().sort()).toEqual(['decode-a']));
    await follower.close();
    // Closing again changes nothing.
    await expect(follower.close()).resolves.toBeUndefined();
    await store.close();
  });

  test("a superseded incarnation's batch never replaces the newer one's: it is refused, typed, for good", async () => {
    const store = open();
    const chain = hashBlockChain(
      Array.from({ length: 64 * 4 }, (_, i) => i),
      { salt: 1n, blockTokens: 64 },
    );
    const expiresAt = Date.now() + 600_000;
    const lease = await store.grantLease(600_000);
    const oldClaim = await claimIncarnationEpoch(store, { workerId: 'decode-z', incarnation: 'inc-1' });
    const zombie = new InventoryPublisher(store, { ...oldClaim, lease: lease.id });
    await zombie.publish([{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }]);
    const inventory = new RetainedInventory();
    const follower = await followInventory(store, inventory);

    const newClaim = await claimIncarnationEpoch(store, { workerId: 'decode-z', incarnation: 'inc-2' });
    expect(newClaim.epoch).toBeGreaterThan(oldClaim.epoch);
    const fresh = new InventoryPublisher(store, { ...newClaim, lease: lease.id });
    const written = await fresh.publish([{ type: 'stored', tier: 'host', blocks: chain.slice(0, 1), expiresAt }]);
    await vi.waitFor(() =>
      expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ incarnation: 'inc-2', blocks: 1 }]),
    );

    const refused = await zombie
      .publish([{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }])
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SupersededError);
    expect(refused).toMatchObject({
      code: 'SUPERSEDED',
      incarnation: 'inc-1',
      epoch: oldClaim.epoch,
      newerEpoch: newClaim.epoch,
      newerIncarnation: 'inc-2',
    });
    expect(zombie.superseded).toBe(refused);
    await expect(zombie.publish([])).rejects.toBe(refused);
    expect((await store.get(fresh.key))?.modRevision).toBe(written);
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ incarnation: 'inc-2', blocks: 1 }]);
    expect(() => new InventoryPublisher(store, { ...newClaim, epoch: 0, lease: lease.id })).toThrow(
      expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT', path: 'epoch' }),
    );
    await follower.close();

    // A batch written around the fence that claims the newer epoch for another incarnation is refused, not applied.
    const rejected: [string, InventoryEventError][] = [];
    const checking = await followInventory(store, new RetainedInventory(), {
      onRejected: (key, error) => rejected.push([key, error]),
    });
    const forged = {
      version: 2,
      workerId: 'decode-z',
      incarnation: 'inc-x',
      epoch: newClaim.epoch,
      seq: 5,
      events: [],
    };
    await store.put(fresh.key, JSON.stringify(forged));
    await vi.waitFor(() =>
      expect(rejected.map(([key, error]) => [key, error.path])).toEqual([[fresh.key, 'incarnation']]),
    );
    await checking.close();
    await store.close();
  });
});
