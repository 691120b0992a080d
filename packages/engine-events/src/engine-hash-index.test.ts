import { describe, expect, it } from 'vitest';
import { EngineHashIndex, engineHashKey } from './engine-hash-index.js';

describe('EngineHashIndex', () => {
  it('agrees with a Map through growth, tier changes and deletions', () => {
    const index = new EngineHashIndex();
    const model = new Map<bigint, { chain: bigint; tiers: number }>();
    let state = 12345;
    const next = (): number => (state = (Math.imul(state, 1103515245) + 12345) >>> 0);
    // Keys from a small range so that the same keys come back and probe runs collide.
    const keyOf = (): bigint => BigInt(next() % 5000) * 0x9e3779b97f4a7c15n;
    let findsWhileGrowing = 0;
    for (let step = 0; step < 50_000; step++) {
      const hash = BigInt.asIntN(64, keyOf());
      const key = engineHashKey(hash);
      const bit = 1 + (next() % 2);
      if (next() % 3 !== 0) {
        const chainLo = next();
        const chainHi = next();
        const entry = model.get(key);
        expect(index.hold(hash, chainLo, chainHi, bit)).toBe(entry === undefined || (entry.tiers & bit) === 0);
        if (entry === undefined) model.set(key, { chain: (BigInt(chainHi) << 32n) | BigInt(chainLo), tiers: bit });
        else entry.tiers |= bit;
      } else {
        if (index.growing) findsWhileGrowing++;
        const slot = index.find(hash);
        const entry = model.get(key);
        expect(slot >= 0).toBe(entry !== undefined);
        if (entry === undefined) continue;
        expect(index.chainAt(slot)).toBe(entry.chain);
        expect(index.tiersAt(slot)).toBe(entry.tiers);
        index.release(slot, bit);
        entry.tiers &= ~bit;
        if (entry.tiers === 0) model.delete(key);
      }
    }
    expect(findsWhileGrowing).toBeGreaterThan(0);
    expect(index.size).toBe(model.size);
    for (const [key, entry] of model) expect(index.chainAt(index.find(key))).toBe(entry.chain);
    index.clear();
    expect(index.size).toBe(0);
    expect(index.find([...model.keys()][0]!)).toBe(-1);
  });

  it('grows without a pause: the previous table moves over a few slots per operation, its entries found meanwhile', () => {
    const index = new EngineHashIndex();
    const keys = Array.from({ length: 2_000 }, (_, i) => BigInt(i + 1) * 0xd1b54a32d192ed03n);
    // 1,024 slots at first: the 513th entry doubles the table.
    keys.slice(0, 512).forEach((key, i) => index.hold(key, i, 0, 1));
    expect(index.growing).toBe(false);
    index.hold(keys[512]!, 512, 0, 1);
    expect(index.growing).toBe(true);
    let holds = 1;
    for (let i = 513; index.growing; i++, holds++) {
      index.hold(keys[i]!, i, 0, 2);
      for (let j = 0; j <= i; j += 97) expect(index.chainAt(index.find(keys[j]!))).toBe(BigInt(j));
    }
    // 1,024 slots moved 4 per operation (each hold, and each find of a key the new table lacks) or on demand
    expect(holds).toBeGreaterThan(20);
    expect(index.size).toBe(512 + holds);
    keys.slice(0, 512 + holds).forEach((key, i) => expect(index.chainAt(index.find(key))).toBe(BigInt(i)));
  });

  it('keys a digest by its last 8 bytes and a signed integer by its bits', () => {
    const digest = new Uint8Array(32).map((_, i) => i);
    expect(engineHashKey(digest)).toBe(0x18191a1b1c1d1e1fn);
    expect(engineHashKey(-1n)).toBe((1n << 64n) - 1n);
    expect(engineHashKey(5n)).toBe(5n);
  });

  it('refuses a hash that is neither a 64-bit integer nor a digest of 8 bytes or more, naming it', () => {
    const refused = expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument: 'hash' });
    // A short digest threw a RangeError, a number a TypeError; integers beyond 64 bits were taken modulo 2^64.
    for (const hash of [new Uint8Array(4), 5, 1n << 64n, -(1n << 63n) - 1n, null])
      expect(() => engineHashKey(hash as never)).toThrow(refused);
  });
});
