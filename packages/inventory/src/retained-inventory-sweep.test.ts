import { expect, test } from 'vitest';
import { hashBlockChain } from './block-hash.js';
import type { InventoryEvent } from './events.js';
import { RetainedInventory } from './retained-inventory.js';

// The expiry sweep: expired entries are freed a bounded number of records per operation, without `prune`.

function clock(start = 1_750_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms), at: () => now };
}

const scheme64 = { salt: 0x5eedn, blockTokens: 64 };
const tokens = (seed: number, count: number) =>
  Array.from({ length: count }, (_, i) => (seed * 7919 + i * 31) % 151936);

test('expired entries are freed by applies and lookups, a bounded number of records per call, without prune', () => {
  const time = clock();
  const inventory = new RetainedInventory({ now: time.now, pruneStep: 4 });
  const chain = hashBlockChain(tokens(11, 64 * 10), scheme64);
  inventory.apply({
    workerId: 'a',
    incarnation: 'i',
    epoch: 1,
    seq: 0,
    events: [{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt: time.at() + 1_000 }],
  });
  expect(inventory.size).toBe(10);
  time.advance(1_000);
  // Each lookup checks the next 4 records, in turn, where the last call left off.
  const sizes = [inventory.size];
  while (inventory.size > 0) {
    expect(inventory.longestRetainedPrefix(chain)).toEqual([]);
    sizes.push(inventory.size);
  }
  expect(sizes.length - 1).toBeLessThanOrEqual(4); // 10 records and one step to wrap around
  sizes.slice(1).forEach((size, i) => expect(sizes[i]! - size).toBeLessThanOrEqual(4));

  // An apply checks 4 records plus one per block it carries.
  inventory.apply({
    workerId: 'a',
    incarnation: 'i',
    epoch: 1,
    seq: 1,
    events: [{ type: 'stored', tier: 'host', blocks: chain.slice(0, 8), expiresAt: time.at() + 1_000 }],
  });
  time.advance(1_000);
  const fresh = hashBlockChain(tokens(12, 64 * 2), scheme64);
  let applies = 0;
  while ((inventory.size > 2 || applies === 0) && applies < 10) {
    const before = inventory.size;
    inventory.apply({
      workerId: 'b',
      incarnation: 'i',
      epoch: 1,
      seq: applies++,
      events: [{ type: 'stored', tier: 'gpu', blocks: fresh, expiresAt: time.at() + 1_000 }],
    });
    expect(before + (applies === 1 ? 2 : 0) - inventory.size).toBeLessThanOrEqual(4 + 2);
  }
  expect(applies).toBeLessThanOrEqual(3);
  expect(inventory.longestRetainedPrefix(fresh)).toMatchObject([{ workerId: 'b', blocks: 2 }]);
  expect(inventory.size).toBe(2);
  // A worker's slab is compacted once most of it is dead, at its next batch.
  const bytes = inventory.indexBytes;
  inventory.apply({ workerId: 'a', incarnation: 'i', epoch: 1, seq: 2, events: [] });
  expect(inventory.indexBytes).toBeLessThan(bytes);
});

test('a pruneStep larger than the inventory checks each record once per operation, not pruneStep times over', () => {
  const time = clock();
  const inventory = new RetainedInventory({ now: time.now, pruneStep: 1_000 });
  // The table engine's record check, counted per record.
  const engine = (
    inventory as unknown as { index: { expire: (worker: number, record: number, ...ticks: number[]) => void } }
  ).index;
  const checks = new Map<string, number>();
  const expire = engine.expire.bind(engine);
  engine.expire = (worker, record, ...ticks) => {
    checks.set(`${worker}/${record}`, (checks.get(`${worker}/${record}`) ?? 0) + 1);
    expire(worker, record, ...ticks);
  };
  const chain = hashBlockChain(tokens(13, 64 * 5), scheme64);
  const stored = (blocks: BigUint64Array, ttl: number): InventoryEvent[] => [
    { type: 'stored', tier: 'gpu', blocks, expiresAt: time.at() + ttl },
  ];
  inventory.apply({ workerId: 'a', incarnation: 'i', epoch: 1, seq: 0, events: stored(chain.slice(0, 3), 1_000) });
  inventory.apply({ workerId: 'b', incarnation: 'i', epoch: 1, seq: 0, events: stored(chain.slice(3), 60_000) });
  time.advance(1_000);
  checks.clear();
  inventory.apply({ workerId: 'b', incarnation: 'i', epoch: 1, seq: 1, events: [] });
  // All five records checked, each once, and what expired freed: a's three.
  expect([...checks.values()]).toEqual([1, 1, 1, 1, 1]);
  expect(inventory.size).toBe(2);
  checks.clear();
  expect(inventory.longestRetainedPrefix(chain.subarray(3))).toMatchObject([{ workerId: 'b', blocks: 2 }]);
  expect([...checks.values()]).toEqual([1, 1, 1, 1, 1]);
});
