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
    expect(index.size).toBe(model.size);
    for (const [key, entry] of model) expect(index.chainAt(index.find(key))).toBe(entry.chain);
    index.clear();
    expect(index.size).toBe(0);
    expect(index.find([...model.keys()][0]!)).toBe(-1);
  });

  it('keys a digest by its last 8 bytes and a signed integer by its bits', () => {
    const digest = new Uint8Array(32).map((_, i) => i);
    expect(engineHashKey(digest)).toBe(0x18191a1b1c1d1e1fn);
    expect(engineHashKey(-1n)).toBe((1n << 64n) - 1n);
    expect(engineHashKey(5n)).toBe(5n);
  });
});
