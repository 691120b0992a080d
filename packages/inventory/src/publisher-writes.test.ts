// The order and the failures of an InventoryPublisher's writes, forced through a store that holds each
// inventory batch's write until the test releases or fails it.
import { expect, test } from 'vitest';
import {
  claimIncarnationEpoch,
  type CommitOptions,
  type DiscoveryOperation,
  DiscoveryUnavailableError,
  MemoryDiscoveryStore,
} from '@kvreuse/discovery';
import { defaultInventoryPrefix, InventoryPublisher } from './discovery-feed.js';
import { type InventoryBatch, safeParseInventoryBatch } from './events.js';

interface HeldWrite {
  release(): void;
  fail(error: Error): void;
}

/** A memory store that holds every write of an inventory batch until the test releases or fails it. */
class HeldWritesStore extends MemoryDiscoveryStore {
  readonly held: HeldWrite[] = [];
  private readonly waiters: { readonly count: number; readonly resolve: () => void }[] = [];

  override async commit(operations: readonly DiscoveryOperation[], options?: CommitOptions): Promise<number> {
    if (!operations.some((op) => op.type === 'put' && op.key.startsWith(defaultInventoryPrefix)))
      return super.commit(operations, options);
    const answered = new Promise<void>((resolve, reject) => this.held.push({ release: resolve, fail: reject }));
    for (const waiter of this.waiters.filter(({ count }) => count <= this.held.length)) waiter.resolve();
    await answered;
    return super.commit(operations, options);
  }

  /** Resolves once `count` writes have been held, released or not. */
  writesHeld(count: number): Promise<void> {
    if (this.held.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  /** The batch stored under `key` now. */
  async batchAt(key: string): Promise<InventoryBatch | undefined> {
    const entry = await this.get(key);
    if (entry === undefined) return undefined;
    const parsed = safeParseInventoryBatch(entry.value);
    if (!parsed.success) throw parsed.error;
    return parsed.data;
  }
}

/**
 * Answers the writes out of order where it can: releases the newest write held, each time a new one is
 * held, until `done` settles; then releases whatever is still held.
 */
async function releaseNewestFirst(store: HeldWritesStore, done: Promise<unknown>): Promise<void> {
  const settled = done.then(
    () => 'done' as const,
    () => 'done' as const,
  );
  for (let seen = 0; ;) {
    const next = await Promise.race([settled, store.writesHeld(seen + 1).then(() => 'held' as const)]);
    if (next === 'done') break;
    seen = store.held.length;
    store.held.at(-1)!.release();
  }
  for (const write of store.held) write.release();
}

async function publisherOn(store: HeldWritesStore): Promise<InventoryPublisher> {
  const lease = await store.grantLease(600_000);
  const claim = await claimIncarnationEpoch(store, { workerId: 'decode-0', incarnation: 'i' });
  return new InventoryPublisher(store, { ...claim, lease: lease.id });
}

const expiresAt = Date.now() + 600_000;
const stored = (block: bigint) => [{ type: 'stored' as const, tier: 'gpu' as const, blocks: [block], expiresAt }];
const storeFailure = () => new DiscoveryUnavailableError('memory', 'commit', undefined);

test('batches are written one at a time, in publish order: a store answering out of order never leaves an earlier batch last', async () => {
  const store = new HeldWritesStore();
  const publisher = await publisherOn(store);
  const first = publisher.publish(stored(1n));
  const second = publisher.publish(stored(2n));
  await releaseNewestFirst(store, second);
  expect([await first, await second]).toEqual([expect.any(Number), expect.any(Number)]);
  expect(await store.batchAt(publisher.key)).toMatchObject({ seq: 1, events: [{ blocks: new BigUint64Array([2n]) }] });
  await store.close();
});

test('withdraw() waits for every batch published before it, so none re-creates the key afterwards', async () => {
  const store = new HeldWritesStore();
  const publisher = await publisherOn(store);
  const writes = [publisher.publish(stored(1n)), publisher.publish(stored(2n))];
  const withdrawn = publisher.withdraw();
  await releaseNewestFirst(store, withdrawn);
  expect(await withdrawn).toBe(true);
  await Promise.all(writes);
  expect(await store.get(publisher.key)).toBeUndefined();
  await store.close();
});

test('a failed write leaves the inventory incomplete until a batch saying complete is published after it', async () => {
  const store = new HeldWritesStore();
  const publisher = await publisherOn(store);
  const announced = publisher.publish(stored(1n), { complete: true });
  await store.writesHeld(1);
  store.held[0]!.fail(storeFailure());
  await expect(announced).rejects.toThrow(DiscoveryUnavailableError);
  expect(publisher.complete).toBe(false);

  // A later batch does not say complete: its followers never got the announcement's events.
  const update = publisher.publish(stored(2n));
  await store.writesHeld(2);
  store.held[1]!.release();
  await update;
  const afterFailure = await store.batchAt(publisher.key);
  expect(afterFailure).toMatchObject({ seq: 1 });
  expect(afterFailure).not.toHaveProperty('complete');

  // Announced again, after the failure: complete from then on, a later failure notwithstanding.
  const again = publisher.publish(stored(1n), { complete: true });
  await store.writesHeld(3);
  store.held[2]!.release();
  await again;
  expect(publisher.complete).toBe(true);
  const lost = publisher.publish(stored(3n));
  await store.writesHeld(4);
  store.held[3]!.fail(storeFailure());
  await expect(lost).rejects.toThrow(DiscoveryUnavailableError);
  const next = publisher.publish(stored(4n));
  await store.writesHeld(5);
  store.held[4]!.release();
  await next;
  expect(publisher.complete).toBe(true);
  expect(await store.batchAt(publisher.key)).toMatchObject({ seq: 4, complete: true });
  await store.close();
});

test('complete: true given before an earlier batch failed does not count: that batch and later ones say nothing of it', async () => {
  const store = new HeldWritesStore();
  const publisher = await publisherOn(store);
  const part = publisher.publish(stored(1n));
  const rest = publisher.publish(stored(2n), { complete: true });
  await store.writesHeld(1);
  store.held[0]!.fail(storeFailure());
  await expect(part).rejects.toThrow(DiscoveryUnavailableError);
  await store.writesHeld(2);
  store.held[1]!.release();
  await rest;
  expect(publisher.complete).toBe(false);
  expect(await store.batchAt(publisher.key)).not.toHaveProperty('complete');
  await store.close();
});
