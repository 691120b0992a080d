import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { InvalidInventoryOptionError, InventoryEventError } from './errors.js';
import { hashBlockChain } from './block-hash.js';
import type { InventoryEvent, RetentionTier } from './events.js';
import { RetainedInventory } from './retained-inventory.js';
import { maxExpectedBlocks } from './retained-table.js';

/** The inventory's table engine, whose private fields the tests read for their sake. */
const engineOf = (inventory: RetainedInventory): Record<string, unknown> =>
  (inventory as unknown as { index: Record<string, unknown> }).index;
/** Whether the table is moving its blocks to a grown one. */
const growing = (inventory: RetainedInventory): boolean => (engineOf(inventory).previousSlots as number) > 0;
/** Whether some worker's slab is being compacted. */
const compacting = (inventory: RetainedInventory): boolean =>
  (engineOf(inventory).compactRead as number[]).some((read) => read >= 0);

function clock(start = 1_750_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms), at: () => now };
}

const scheme64 = { salt: 0x5eedn, blockTokens: 64 };
const scheme4 = { salt: 0x5eedn, blockTokens: 4 };
const tokens = (seed: number, count: number) =>
  Array.from({ length: count }, (_, i) => (seed * 7919 + i * 31) % 151936);

type ModelOp =
  | { kind: 'store'; worker: number; tier: RetentionTier; from: number; count: number; ttl: number }
  | { kind: 'remove'; worker: number; tier: RetentionTier; from: number; count: number }
  | { kind: 'clear'; worker: number; tier: RetentionTier }
  | { kind: 'leave'; worker: number }
  | { kind: 'tick'; ms: number }
  | { kind: 'lookup'; from: number }
  | { kind: 'prune' };

/** One operation on workers w0–w5, either tier and blocks 0–39 of a chain, or on the clock or the table. */
function modelOp(): fc.Arbitrary<ModelOp> {
  const worker = fc.integer({ min: 0, max: 5 });
  const tier = fc.constantFrom<RetentionTier>('gpu', 'host');
  const block = fc.integer({ min: 0, max: 39 });
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('store' as const),
        worker,
        tier,
        from: block,
        count: fc.integer({ min: 1, max: 12 }),
        ttl: fc.integer({ min: 100, max: 3_000 }),
      }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('remove' as const),
        worker,
        tier,
        from: block,
        count: fc.integer({ min: 1, max: 6 }),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const), worker, tier }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('leave' as const), worker }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 1_500 }) }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('lookup' as const), from: block }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('prune' as const) }) },
  );
}

/** What the model says each of workers w0–w5 retains of a chain of `length` blocks from block `from`, longest first. */
function expectedPrefixes(alive: (w: number, t: RetentionTier, b: number) => boolean, length: number, from: number) {
  const expected = [];
  for (let w = 0; w <= 5; w++) {
    let blocks = 0;
    let gpuBlocks = 0;
    let hostBlocks = 0;
    let leadingHostBlocks = 0;
    while (from + blocks < length && (alive(w, 'gpu', from + blocks) || alive(w, 'host', from + blocks))) {
      gpuBlocks += alive(w, 'gpu', from + blocks) ? 1 : 0;
      hostBlocks += alive(w, 'host', from + blocks) ? 1 : 0;
      if (leadingHostBlocks === blocks && alive(w, 'host', from + blocks)) leadingHostBlocks++;
      blocks++;
    }
    if (blocks > 0) expected.push({ workerId: `w${w}`, blocks, gpuBlocks, hostBlocks, leadingHostBlocks });
  }
  return expected.sort((a, b) => b.blocks - a.blocks || (a.workerId < b.workerId ? -1 : 1));
}

type Steps = { rehashStep: number; pruneStep: number; compactStep: number };

/** A RetainedInventory that workers w0–w5 have joined, each at seq 0. */
function inventoryOfSixWorkers(now: () => number, steps: Steps) {
  const inventory = new RetainedInventory({ now, expectedBlocks: 16, ...steps });
  // Workers w0–w3 get internal indexes 32 apart, so they share a holder signature bit.
  for (let w = 0; w <= 5; w++) {
    inventory.apply({ workerId: `w${w}`, incarnation: 'i', epoch: 1, seq: 0, events: [] });
    if (w < 3)
      for (let f = 0; f < 31; f++)
        inventory.apply({ workerId: `filler-${w}-${f}`, incarnation: 'i', epoch: 1, seq: 0, events: [] });
  }
  return inventory;
}

/** The inventory's longest retained prefixes of `chain`, each as its worker and block counts only. */
function retainedPrefixCounts(inventory: RetainedInventory, chain: BigUint64Array) {
  return inventory
    .longestRetainedPrefix(chain)
    .map(({ workerId, blocks, gpuBlocks, hostBlocks, leadingHostBlocks }) => ({
      workerId,
      blocks,
      gpuBlocks,
      hostBlocks,
      leadingHostBlocks,
    }));
}

/**
 * A RetainedInventory of workers w0–w5 over `chain`, and a plain Map model of it: `apply` gives both an
 * operation and checks the inventory's size after it, `check` compares a lookup with the model (counted in
 * `growth` when the table was growing then); while a slab is being compacted, every operation is followed by a lookup.
 */
function modelledInventory(chain: BigUint64Array, steps: Steps, growth: { checksWhileGrowing: number }) {
  const time = clock();
  const inventory = inventoryOfSixWorkers(time.now, steps);
  const model = new Map<string, number>(); // `${worker}/${tier}/${block}` → expiry ms
  const seq = new Map<number, number>([
    [0, 0],
    [1, 0],
    [2, 0],
    [3, 0],
    [4, 0],
    [5, 0],
  ]);
  const send = (w: number, events: InventoryEvent[]) => {
    const next = (seq.get(w) ?? -1) + 1;
    seq.set(w, next);
    inventory.apply({ workerId: `w${w}`, incarnation: 'i', epoch: 1, seq: next, events });
  };
  const alive = (w: number, t: RetentionTier, b: number) =>
    (model.get(`${w}/${t}/${b}`) ?? 0) > Math.floor(time.at() / 100) * 100;
  const check = (from: number) => {
    if (growing(inventory)) growth.checksWhileGrowing++;
    const expected = expectedPrefixes(alive, chain.length, from);
    expect(retainedPrefixCounts(inventory, chain.subarray(from))).toEqual(expected);
  };
  // The entries counted: never fewer than those alive, never more than those not withdrawn.
  const checkSize = () => {
    const live = [...model.keys()].filter((key) => {
      const [w, t, b] = key.split('/');
      return alive(Number(w), t as RetentionTier, Number(b));
    });
    const blocksOf = (keys: string[]) => new Set(keys.map((key) => key.replace(/\/(gpu|host)\//, '/'))).size;
    expect(inventory.size).toBeGreaterThanOrEqual(blocksOf(live));
    expect(inventory.size).toBeLessThanOrEqual(blocksOf([...model.keys()]));
    return blocksOf(live);
  };
  const apply = (o: ModelOp) => {
    if (o.kind === 'store' || o.kind === 'remove') {
      const blocks = chain.slice(o.from, o.from + o.count);
      const expiresAt = time.at() + (o.kind === 'store' ? o.ttl : 0);
      send(o.worker, [
        o.kind === 'store'
          ? { type: 'stored', tier: o.tier, blocks, expiresAt }
          : { type: 'removed', tier: o.tier, blocks },
      ]);
      for (let b = o.from; b < o.from + blocks.length; b++) {
        if (o.kind === 'store' && Math.ceil(expiresAt / 100) * 100 > Math.floor(time.at() / 100) * 100) {
          model.set(`${o.worker}/${o.tier}/${b}`, Math.ceil(expiresAt / 100) * 100);
        } else {
          model.delete(`${o.worker}/${o.tier}/${b}`);
        }
      }
    } else if (o.kind === 'clear') {
      send(o.worker, [{ type: 'cleared', tier: o.tier }]);
      for (const key of [...model.keys()]) if (key.startsWith(`${o.worker}/${o.tier}/`)) model.delete(key);
    } else if (o.kind === 'leave') {
      inventory.removeWorker(`w${o.worker}`);
      seq.delete(o.worker);
      for (const key of [...model.keys()]) if (key.startsWith(`${o.worker}/`)) model.delete(key);
    } else if (o.kind === 'tick') {
      time.advance(o.ms);
    } else if (o.kind === 'lookup') {
      check(o.from);
    } else {
      inventory.prune();
      expect(inventory.size).toBe(checkSize());
    }
    checkSize();
    // A compaction moves records between operations: every step of one is checked by a lookup.
    if (compacting(inventory)) check(0);
  };
  return { apply, check };
}

describe('RetainedInventory', () => {
  test('answers per worker how many leading blocks it retains, and on which tier', () => {
    const time = clock();
    const inventory = new RetainedInventory({ now: time.now });
    const chain = hashBlockChain(tokens(1, 64 * 10), scheme64);
    const expiresAt = time.at() + 60_000;
    inventory.apply({
      workerId: 'decode-a',
      incarnation: 'i1',
      epoch: 1,
      seq: 0,
      events: [
        { type: 'stored', tier: 'gpu', blocks: chain.slice(0, 6), expiresAt },
        { type: 'stored', tier: 'host', blocks: chain.slice(4, 8), expiresAt },
      ],
    });
    inventory.apply({
      workerId: 'decode-b',
      incarnation: 'i1',
      epoch: 1,
      seq: 0,
      events: [{ type: 'stored', tier: 'host', blocks: [...chain.slice(0, 3), chain[4]!], expiresAt }],
    });
    inventory.apply({
      workerId: 'decode-c',
      incarnation: 'i1',
      epoch: 1,
      seq: 0,
      events: [{ type: 'stored', tier: 'gpu', blocks: chain.slice(1, 10), expiresAt }],
    });
    expect(inventory.longestRetainedPrefix(chain)).toEqual([
      {
        workerId: 'decode-a',
        incarnation: 'i1',
        blocks: 8,
        gpuBlocks: 6,
        hostBlocks: 4,
        leadingHostBlocks: 0,
        expiresAt,
      },
      {
        workerId: 'decode-b',
        incarnation: 'i1',
        blocks: 3,
        gpuBlocks: 0,
        hostBlocks: 3,
        leadingHostBlocks: 3,
        expiresAt,
      },
    ]);
    expect(inventory.longestRetainedPrefix(chain.slice(1))).toEqual([
      expect.objectContaining({ workerId: 'decode-c', blocks: 9 }),
      expect.objectContaining({ workerId: 'decode-a', blocks: 7 }),
      expect.objectContaining({ workerId: 'decode-b', blocks: 2 }),
    ]);
    expect(inventory.longestRetainedPrefix(hashBlockChain(tokens(2, 64), scheme64))).toEqual([]);
    expect(inventory.longestRetainedPrefix(new BigUint64Array(0))).toEqual([]);
    expect(inventory.size).toBe(8 + 4 + 9);
  });

  test('many workers on the same first blocks are followed together with the same answers', () => {
    const time = clock();
    const inventory = new RetainedInventory({ now: time.now });
    const chain = hashBlockChain(tokens(6, 64 * 64), scheme64);
    const expected = [];
    for (let w = 0; w < 40; w++) {
      // Worker w retains the first w + 1 blocks (on the host when w is odd) and a gap, then more.
      const tier = w % 2 === 1 ? 'host' : 'gpu';
      const expiresAt = time.at() + 10_000 + w * 1_000;
      inventory.apply({
        workerId: `w${String(w).padStart(2, '0')}`,
        incarnation: 'i',
        epoch: 1,
        seq: 0,
        events: [{ type: 'stored', tier, blocks: [...chain.slice(0, w + 1), ...chain.slice(w + 2)], expiresAt }],
      });
      expected.push({
        workerId: `w${String(w).padStart(2, '0')}`,
        incarnation: 'i',
        blocks: w + 1,
        gpuBlocks: tier === 'gpu' ? w + 1 : 0,
        hostBlocks: tier === 'host' ? w + 1 : 0,
        leadingHostBlocks: tier === 'host' ? w + 1 : 0,
        expiresAt,
      });
    }
    expect(inventory.longestRetainedPrefix(chain)).toEqual(expected.reverse());
    // Past w05's expiry, workers 0–5 no longer count.
    time.advance(15_000);
    expect(inventory.longestRetainedPrefix(chain).map((p) => p.workerId)).toEqual(
      expected.slice(0, 34).map((p) => p.workerId),
    );
  });

  test('removed and cleared events withdraw blocks per tier', () => {
    const inventory = new RetainedInventory();
    const chain = hashBlockChain(tokens(3, 64 * 4), scheme64);
    const expiresAt = Date.now() + 60_000;
    const batch = (seq: number, events: InventoryEvent[]) =>
      inventory.apply({ workerId: 'w', incarnation: 'i', epoch: 1, seq, events });
    batch(0, [
      { type: 'stored', tier: 'gpu', blocks: chain, expiresAt },
      { type: 'stored', tier: 'host', blocks: chain.slice(0, 2), expiresAt },
    ]);
    batch(1, [{ type: 'removed', tier: 'gpu', blocks: [chain[1]!] }]);
    // Block 1 is still on the host tier, so the prefix goes on through the GPU blocks after it.
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([
      { blocks: 4, gpuBlocks: 3, hostBlocks: 2, leadingHostBlocks: 2 },
    ]);
    batch(2, [{ type: 'cleared', tier: 'host' }]);
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ blocks: 1, gpuBlocks: 1, hostBlocks: 0 }]);
    batch(3, [{ type: 'cleared', tier: 'gpu' }]);
    expect(inventory.longestRetainedPrefix(chain)).toEqual([]);
    expect(inventory.size).toBe(0);
  });

  test('entries expire: lookups skip them and prune frees them', () => {
    const time = clock();
    // No sweep, so that prune alone frees what expired.
    const inventory = new RetainedInventory({ now: time.now, pruneStep: 0 });
    const chain = hashBlockChain(tokens(4, 64 * 3), scheme64);
    inventory.apply({
      workerId: 'w',
      incarnation: 'i',
      epoch: 1,
      seq: 0,
      events: [
        { type: 'stored', tier: 'gpu', blocks: chain.slice(0, 2), expiresAt: time.at() + 1_000 },
        { type: 'stored', tier: 'gpu', blocks: chain.slice(2), expiresAt: time.at() + 5_000 },
      ],
    });
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ blocks: 3, expiresAt: time.at() + 1_000 }]);
    time.advance(1_000);
    expect(inventory.longestRetainedPrefix(chain)).toEqual([]);
    expect(inventory.size).toBe(3);
    expect(inventory.prune()).toBe(2);
    expect(inventory.size).toBe(1);
    // Storing a block again renews it; storing it with an expiry already past withdraws it.
    inventory.apply({
      workerId: 'w',
      incarnation: 'i',
      epoch: 1,
      seq: 1,
      events: [{ type: 'stored', tier: 'gpu', blocks: chain.slice(0, 2), expiresAt: time.at() + 1_000 }],
    });
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ blocks: 3 }]);
    inventory.apply({
      workerId: 'w',
      incarnation: 'i',
      epoch: 1,
      seq: 2,
      events: [{ type: 'stored', tier: 'gpu', blocks: [chain[1]!], expiresAt: time.at() - 1 }],
    });
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ blocks: 1 }]);
  });

  test('a block on two tiers is freed tier by tier as each expires', () => {
    const time = clock();
    // A step of 2 checks the one record at every operation (a step that wraps round to it counts as one).
    const inventory = new RetainedInventory({ now: time.now, pruneStep: 2 });
    const chain = hashBlockChain(tokens(13, 64), scheme64);
    inventory.apply({
      workerId: 'a',
      incarnation: 'i',
      epoch: 1,
      seq: 0,
      events: [
        { type: 'stored', tier: 'gpu', blocks: chain, expiresAt: time.at() + 1_000 },
        { type: 'stored', tier: 'host', blocks: chain, expiresAt: time.at() + 2_000 },
      ],
    });
    time.advance(1_000);
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ blocks: 1, gpuBlocks: 0, hostBlocks: 1 }]);
    expect(inventory.size).toBe(1);
    time.advance(1_000);
    expect(inventory.longestRetainedPrefix(chain)).toEqual([]);
    expect(inventory.size).toBe(0);
  });

  test('the table grows a few slots per operation, and answers the same while it does', () => {
    const time = clock();
    const inventory = new RetainedInventory({ now: time.now, expectedBlocks: 16, rehashStep: 3 });
    const chains = Array.from({ length: 250 }, (_, c) => hashBlockChain(tokens(100 + c, 64 * 4), scheme64));
    const expiresAt = time.at() + 60_000;
    let sawGrowing = 0;
    chains.forEach((chain, c) => {
      inventory.apply({
        workerId: `w${c % 3}`,
        incarnation: 'i',
        epoch: 1,
        seq: Math.floor(c / 3),
        events: [{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }],
      });
      if (growing(inventory)) sawGrowing++;
      // Every block on its own, after every apply: each goes through the table (a chain's later
      // blocks are found along the worker's records), so blocks whose probe wrapped past the end of
      // the previous table are looked up while that table empties from the end down.
      for (let d = 0; d <= c; d++) {
        for (let block = 0; block < 4; block++) {
          expect(inventory.longestRetainedPrefix(chains[d]!.subarray(block, block + 1))).toEqual([
            {
              workerId: `w${d % 3}`,
              incarnation: 'i',
              blocks: 1,
              gpuBlocks: 1,
              hostBlocks: 0,
              leadingHostBlocks: 0,
              expiresAt,
            },
          ]);
        }
      }
    });
    expect(sawGrowing).toBeGreaterThan(0);
    expect(inventory.size).toBe(1_000);
  });

  test('a large table empties its previous one from the end, answers the same mid-move, keeps it whole until then, and drops it once empty', () => {
    const time = clock();
    // 32,000 blocks in 4-block chains: the table grows to 29,070 then 43,605 slots.
    const inventory = new RetainedInventory({ now: time.now, expectedBlocks: 16 });
    const previousBytes = () => (engineOf(inventory).previous as Int32Array).byteLength;
    const chains = Array.from({ length: 8_000 }, (_, c) => hashBlockChain(tokens(1_000 + c, 4 * 4), scheme4));
    const expiresAt = time.at() + 60_000;
    let checkedMidMove = 0;
    let dropped = 0;
    let bytesAtGrowth = 0;
    chains.forEach((chain, c) => {
      const wasGrowing = growing(inventory);
      inventory.apply({
        workerId: `w${c % 5}`,
        incarnation: 'i',
        epoch: 1,
        seq: Math.floor(c / 5),
        events: [{ type: 'stored', tier: 'host', blocks: chain, expiresAt }],
      });
      if (wasGrowing && !growing(inventory)) {
        dropped++;
        expect(previousBytes()).toBe(0);
      }
      // Never cut back while it empties: the first shrink of a large resizable buffer paused applies.
      if (!wasGrowing && growing(inventory)) bytesAtGrowth = previousBytes();
      if (wasGrowing && growing(inventory)) expect(previousBytes()).toBe(bytesAtGrowth);
      if (growing(inventory) && c % 97 === 0) {
        checkedMidMove++;
        // Mid-move, every block stored so far is found, moved or not.
        for (let d = 0; d <= c; d += 3) {
          expect(inventory.longestRetainedPrefix(chains[d]!)).toEqual([
            {
              workerId: `w${d % 5}`,
              incarnation: 'i',
              blocks: 4,
              gpuBlocks: 0,
              hostBlocks: 4,
              leadingHostBlocks: 4,
              expiresAt,
            },
          ]);
        }
      }
    });
    expect(checkedMidMove).toBeGreaterThan(1);
    expect(dropped).toBeGreaterThan(1);
    expect(inventory.size).toBe(32_000);
    chains.forEach((chain, d) => {
      expect(inventory.longestRetainedPrefix(chain)).toEqual([
        {
          workerId: `w${d % 5}`,
          incarnation: 'i',
          blocks: 4,
          gpuBlocks: 0,
          hostBlocks: 4,
          leadingHostBlocks: 4,
          expiresAt,
        },
      ]);
    });
  });

  test("keeps each worker's records on shared buffers, which do not count towards the collector's triggers", () => {
    const inventory = new RetainedInventory({ expectedBlocks: 16 });
    const expiresAt = Date.now() + 60_000;
    for (let c = 0; c < 200; c++) {
      inventory.apply({
        workerId: `w${c % 2}`,
        incarnation: 'i',
        epoch: 1,
        seq: Math.floor(c / 2),
        events: [{ type: 'stored', tier: 'host', blocks: hashBlockChain(tokens(c, 4 * 4), scheme4), expiresAt }],
      });
    }
    const slabs = (engineOf(inventory).records as Int32Array[]).filter((slab) => slab.length > 0);
    expect(slabs).toHaveLength(2);
    for (const slab of slabs) expect(slab.buffer).toBeInstanceOf(SharedArrayBuffer);
  });

  test('refuses malformed options with a typed error naming the option', () => {
    const bad = (options: unknown) => () => new RetainedInventory(options as never);
    expect(bad(null)).toThrow(expect.objectContaining({ code: 'INVALID_INVENTORY_OPTION', option: 'options' }));
    expect(bad({ now: 5 })).toThrow(expect.objectContaining({ option: 'options.now' }));
    expect(bad({ now: () => Number.NaN })).toThrow(expect.objectContaining({ option: 'options.now' }));
    // A clock in seconds, or a monotonic one: against it, every expiry (ms since the Unix epoch) would be decades away.
    expect(bad({ now: () => Math.floor(Date.now() / 1000) })).toThrow(
      expect.objectContaining({ code: 'INVALID_INVENTORY_OPTION', option: 'options.now' }),
    );
    expect(bad({ now: () => performance.now() })).toThrow(
      expect.objectContaining({ option: 'options.now', message: expect.stringContaining('monotonic clock') }),
    );
    expect(bad({ rehashStep: 2 })).toThrow(expect.objectContaining({ option: 'options.rehashStep', value: 2 }));
    expect(bad({ pruneStep: -1 })).toThrow(expect.objectContaining({ option: 'options.pruneStep' }));
    expect(bad({ expectedBlocks: Number.NaN })).toThrow('options.expectedBlocks = NaN is refused');
    expect(bad({ expectedBlocks: 1.5 })).toThrow(InvalidInventoryOptionError);
    // More than a typed array could hold: refused, not a RangeError of the table (nor a table of gigabytes).
    expect(bad({ expectedBlocks: 2 ** 40 })).toThrow(
      expect.objectContaining({ code: 'INVALID_INVENTORY_OPTION', option: 'options.expectedBlocks', value: 2 ** 40 }),
    );
    expect(bad({ expectedBlocks: maxExpectedBlocks + 1 })).toThrow(
      `options.expectedBlocks = ${maxExpectedBlocks + 1} is refused: must be a whole number from 0 to ${maxExpectedBlocks}`,
    );
  });

  test('a new incarnation replaces the old one; stale or repeated batches are ignored', () => {
    const inventory = new RetainedInventory();
    const chain = hashBlockChain(tokens(5, 64 * 4), scheme64);
    const expiresAt = Date.now() + 60_000;
    expect(
      inventory.apply({
        workerId: 'w',
        incarnation: 'old',
        epoch: 1,
        seq: 5,
        events: [{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }],
      }),
    ).toBe(true);
    expect(
      inventory.apply({
        workerId: 'w',
        incarnation: 'old',
        epoch: 1,
        seq: 5,
        events: [{ type: 'cleared', tier: 'gpu' }],
      }),
    ).toBe(false);
    expect(inventory.longestRetainedPrefix(chain)).toMatchObject([{ blocks: 4, incarnation: 'old' }]);
    inventory.apply({
      workerId: 'w',
      incarnation: 'new',
      epoch: 2,
      seq: 0,
      events: [{ type: 'stored', tier: 'host', blocks: chain.slice(0, 1), expiresAt }],
    });
    expect(inventory.longestRetainedPrefix(chain)).toEqual([
      expect.objectContaining({ blocks: 1, gpuBlocks: 0, incarnation: 'new' }),
    ]);
    // A superseded incarnation's batch (a smaller epoch) never replaces the newer one's, whatever its seq.
    expect(
      inventory.apply({
        workerId: 'w',
        incarnation: 'old',
        epoch: 1,
        seq: 99,
        events: [{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }],
      }),
    ).toBe(false);
    expect(inventory.longestRetainedPrefix(chain)).toEqual([
      expect.objectContaining({ blocks: 1, gpuBlocks: 0, incarnation: 'new' }),
    ]);
    expect(() => inventory.apply({ workerId: 'w', incarnation: 'other', epoch: 2, seq: 1, events: [] })).toThrow(
      expect.objectContaining({
        code: 'INVENTORY_INVALID_EVENT',
        path: 'incarnation',
        message: expect.stringContaining('epoch 2 belongs to incarnation new'),
      }),
    );
    expect(inventory.removeWorker('w')).toBe(true);
    expect(inventory.removeWorker('w')).toBe(false);
    expect(inventory.longestRetainedPrefix(chain)).toEqual([]);
    expect(inventory.workerCount).toBe(0);
  });

  test('remembers which incarnation said its inventory is complete, until a newer one replaces it', () => {
    const inventory = new RetainedInventory();
    const chain = hashBlockChain(tokens(6, 64 * 2), scheme64);
    const expiresAt = Date.now() + 60_000;
    expect(inventory.completeEpoch('w')).toBeUndefined();
    inventory.apply({
      workerId: 'w',
      incarnation: 'a',
      epoch: 3,
      seq: 0,
      events: [{ type: 'stored', tier: 'host', blocks: chain, expiresAt }],
    });
    expect(inventory.completeEpoch('w')).toBeUndefined();
    // A stale batch (its seq already applied) says nothing, complete or not.
    expect(inventory.apply({ workerId: 'w', incarnation: 'a', epoch: 3, seq: 0, events: [], complete: true })).toBe(
      false,
    );
    expect(inventory.completeEpoch('w')).toBeUndefined();
    inventory.apply({ workerId: 'w', incarnation: 'a', epoch: 3, seq: 1, events: [], complete: true });
    expect(inventory.completeEpoch('w')).toBe(3);
    // Later batches without the flag do not take it back (the flag is the incarnation's, not the batch's).
    inventory.apply({ workerId: 'w', incarnation: 'a', epoch: 3, seq: 2, events: [{ type: 'cleared', tier: 'host' }] });
    expect(inventory.completeEpoch('w')).toBe(3);
    // A restart (a newer epoch) warms again until it says so in turn.
    inventory.apply({ workerId: 'w', incarnation: 'b', epoch: 4, seq: 0, events: [] });
    expect(inventory.completeEpoch('w')).toBeUndefined();
    inventory.apply({ workerId: 'w', incarnation: 'b', epoch: 4, seq: 1, events: [], complete: true });
    expect(inventory.completeEpoch('w')).toBe(4);
    inventory.removeWorker('w');
    expect(inventory.completeEpoch('w')).toBeUndefined();
    expect(() =>
      inventory.apply({ workerId: 'w', incarnation: 'c', epoch: 5, seq: 0, events: [], complete: 'yes' as never }),
    ).toThrow(expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT', path: 'complete', value: 'yes' }));
  });

  test('refuses malformed batches with a typed error naming the path', () => {
    const inventory = new RetainedInventory();
    const bad = (batch: unknown) => () => inventory.apply(batch as never);
    expect(bad({ workerId: '', incarnation: 'i', epoch: 1, seq: 0, events: [] })).toThrow(
      expect.objectContaining({ path: 'workerId' }),
    );
    expect(bad({ workerId: 'w', incarnation: 'i', epoch: 1, seq: -1, events: [] })).toThrow(InventoryEventError);
    expect(bad({ workerId: 'w', incarnation: 'i', epoch: 0, seq: 0, events: [] })).toThrow(
      expect.objectContaining({ path: 'epoch' }),
    );
    expect(
      bad({
        workerId: 'w',
        incarnation: 'i',
        epoch: 1,
        seq: 0,
        events: [{ type: 'stored', tier: 'disk', blocks: [] }],
      }),
    ).toThrow(expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT', path: 'events.0.tier', value: 'disk' }));
    expect(
      bad({
        workerId: 'w',
        incarnation: 'i',
        epoch: 1,
        seq: 0,
        events: [{ type: 'removed', tier: 'gpu', blocks: [1] }],
      }),
    ).toThrow(expect.objectContaining({ path: 'events.0.blocks.0' }));
    // A hole in a sparse array is no hash either (forEach would skip it).
    expect(() => new RetainedInventory().longestRetainedPrefix(new Array<bigint>(3))).toThrow(
      expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT', path: 'chain.0', value: undefined }),
    );
    expect(
      bad({
        workerId: 'w',
        incarnation: 'i',
        epoch: 1,
        seq: 0,
        events: [{ type: 'stored', tier: 'gpu', blocks: [], expiresAt: Number.NaN }],
      }),
    ).toThrow(expect.objectContaining({ path: 'events.0.expiresAt' }));
    // An expiry in seconds (a real one, an hour from now) is refused, not read as long expired.
    const inSeconds = Math.floor(Date.now() / 1000) + 3600;
    expect(
      bad({
        workerId: 'w',
        incarnation: 'i',
        epoch: 1,
        seq: 0,
        events: [{ type: 'stored', tier: 'gpu', blocks: [1n], expiresAt: inSeconds }],
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'INVENTORY_INVALID_EVENT',
        path: 'events.0.expiresAt',
        value: inSeconds,
        message: expect.stringContaining('a timestamp in seconds'),
      }),
    );
    expect(() => inventory.longestRetainedPrefix([5] as never)).toThrow(expect.objectContaining({ path: 'chain.0' }));
    expect(inventory.workerCount).toBe(0);
  });

  test('refuses a batch with a hole among its events before applying any of them', () => {
    const inventory = new RetainedInventory();
    const expiresAt = Date.now() + 60_000;
    const events: InventoryEvent[] = [{ type: 'stored', tier: 'gpu', blocks: [1n], expiresAt }];
    events.length = 2;
    const batch = { workerId: 'w', incarnation: 'i', epoch: 1, seq: 0, events };
    expect(() => inventory.apply(batch)).toThrow(
      expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT', path: 'events.1', value: undefined }),
    );
    expect(inventory.longestRetainedPrefix([1n])).toEqual([]);
    // Its seq was not taken: the batch, mended, applies.
    events.length = 1;
    expect(inventory.apply(batch)).toBe(true);
    expect(inventory.longestRetainedPrefix([1n])).toMatchObject([{ workerId: 'w', blocks: 1 }]);
  });

  test('answers like a plain Map model through any interleaving of applies, expiry and lookups, across growth and compaction steps', () => {
    // Two chains that share their first 10 blocks, 40 distinct hashes per chain at most: from 16
    // expected blocks the table grows three or four times.
    const chainA = hashBlockChain(tokens(9, 40 * 4), scheme4);
    const chainB = BigUint64Array.from([
      ...chainA.slice(0, 10),
      ...hashBlockChain(tokens(10, 30 * 4), scheme4, chainA[9]),
    ]);
    const growth = { checksWhileGrowing: 0 };

    fc.assert(
      fc.property(
        fc.array(modelOp(), { maxLength: 100 }),
        fc.boolean(),
        fc.integer({ min: 3, max: 8 }),
        fc.integer({ min: 0, max: 8 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, useB, rehashStep, pruneStep, compactStep) => {
          const modelled = modelledInventory(useB ? chainB : chainA, { rehashStep, pruneStep, compactStep }, growth);
          for (const o of ops) modelled.apply(o);
          modelled.check(0);
        },
      ),
      { numRuns: 200 },
    );
    // The runs did look up while a growth step was under way (compaction steps: the test below).
    expect(growth.checksWhileGrowing).toBeGreaterThan(0);
  });

  test('compacts a sparse slab in place a bounded number of records per batch, answering the same throughout', () => {
    const time = clock();
    const inventory = new RetainedInventory({ now: time.now, compactStep: 4, pruneStep: 0 });
    const engine = engineOf(inventory) as { compactRead: number[]; recordsUsed: number[] };
    const chain = hashBlockChain(tokens(21, 100 * 4), scheme4);
    const expiresAt = time.at() + 60_000;
    let seq = 0;
    const send = (workerId: string, events: InventoryEvent[]) =>
      inventory.apply({ workerId, incarnation: 'i', epoch: 1, seq: seq++, events });
    // 'b' holds the chain first, so that most of 'a''s entries are overflow entries.
    send('b', [{ type: 'stored', tier: 'gpu', blocks: chain, expiresAt }]);
    send('a', [{ type: 'stored', tier: 'host', blocks: chain, expiresAt }]);
    const held = new Set(chain.keys());
    const check = () => {
      for (const from of [0, 5, 40, 90, 97]) {
        let blocks = 0;
        while (from + blocks < chain.length && held.has(from + blocks)) blocks++;
        const expected = [{ workerId: 'b', blocks: chain.length - from }];
        // longest first, then by worker id
        if (blocks > 0) expected.splice(blocks === chain.length - from ? 0 : 1, 0, { workerId: 'a', blocks });
        expect(inventory.longestRetainedPrefix(chain.subarray(from))).toMatchObject(expected);
      }
    };
    const remove = (from: number, to: number) => {
      send('a', [{ type: 'removed', tier: 'host', blocks: chain.slice(from, to) }]);
      for (let b = from; b < to; b++) held.delete(b);
    };
    const bytes = inventory.indexBytes;
    remove(10, 90); // 80 of 'a''s 100 records dead: its slab is compacted from here, 4 records a batch
    expect(engine.compactRead[1]).toBe(4);
    let batches = 1;
    while (engine.compactRead[1]! >= 0) {
      if (batches === 5)
        remove(95, 96); // a record not read yet dies
      else if (batches === 10)
        remove(2, 3); // a record already compacted dies
      else if (batches === 15) {
        // stored again: appended past the unread records, and compacted in turn
        send('a', [{ type: 'stored', tier: 'host', blocks: chain.slice(40, 44), expiresAt }]);
        for (let b = 40; b < 44; b++) held.add(b);
      } else send('a', []);
      batches++;
      check();
    }
    // 104 records read, 4 a batch and 2 more per block stored: spread over 24 batches, then the slab shrank.
    expect(batches).toBe(24);
    // 22 live records, and block 2's, which died behind the compaction and waits for the next one
    expect(engine.recordsUsed[1]).toBe(23);
    expect(inventory.indexBytes).toBeLessThan(bytes);
    expect(inventory.size).toBe(100 + 22);
    check();
  });
});
