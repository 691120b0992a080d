import { describe, expect, it, vi } from 'vitest';
import { BlockPool } from './block-pool.js';
import { AllBlocksPinnedError, EndpointOptionError } from './errors.js';
import type { EvictedBlock } from './pin-adapter.js';

function filled(slotCount: number, hashes: readonly bigint[]): BlockPool {
  const pool = new BlockPool(slotCount);
  for (const hash of hashes) pool.commit(pool.allocate(), hash);
  return pool;
}

describe('BlockPool', () => {
  it('looks up the longest held prefix of a hash chain', () => {
    const pool = filled(4, [10n, 11n, 13n]);
    expect([...pool.lookup([10n, 11n, 12n, 13n])]).toEqual([0, 1]);
    expect([...pool.lookup([99n, 10n])]).toEqual([]);
  });

  it('evicts the least recently used unpinned block and reports it', () => {
    const pool = filled(3, [10n, 11n, 12n]);
    const evicted: EvictedBlock[] = [];
    pool.onEvicted((blocks) => evicted.push(...blocks));
    pool.requestPin('p', [10n]);
    const slot = pool.allocate();
    expect(slot).toBe(1);
    expect(evicted).toEqual([{ block: 1, hash: 11n }]);
    expect([...pool.lookup([11n])]).toEqual([]);
    pool.commit(slot, 20n);
    expect([...pool.lookup([20n])]).toEqual([1]);
    // What the inventory announces: every held hash, least recently used first.
    expect(pool.retained()).toEqual([12n, 10n, 20n]);
  });

  it('a pin makes its blocks the most recently used', () => {
    const pool = filled(2, [10n, 11n]);
    pool.requestPin('p', [10n]);
    pool.releasePin('p');
    expect(pool.allocate()).toBe(1);
  });

  it('never evicts a pinned block: a typed error when every block is pinned', () => {
    const pool = filled(2, [10n, 11n]);
    expect([...pool.requestPin('a', [10n, 11n]).blocks]).toEqual([0, 1]);
    pool.requestPin('b', [10n]);
    expect(() => pool.allocate()).toThrow(AllBlocksPinnedError);
    expect(() => pool.allocate()).toThrow('all 2 blocks are pinned');
    pool.releasePin('a');
    expect(pool.pinsOn(0)).toBe(1);
    expect(pool.allocate()).toBe(1);
    pool.cancelPin('b');
    expect(pool.pinsOn(0)).toBe(0);
    expect(pool.renewPin('b')).toBe(false);
  });

  it('says so when the slots are taken by blocks allocated and not yet committed, not pinned', () => {
    const pool = new BlockPool(2);
    pool.allocate();
    pool.allocate();
    expect(() => pool.allocate()).toThrow(new AllBlocksPinnedError(2, 2));
    expect(() => pool.allocate()).toThrow(
      'block pool has no slot to give: all 2 blocks are allocated and not yet committed',
    );
    const mixed = filled(2, [10n]);
    mixed.requestPin('p', [10n]);
    mixed.allocate();
    expect(() => mixed.allocate()).toThrow(
      'block pool has no slot to give: all 2 blocks are pinned by readers (1) or allocated and not yet committed (1)',
    );
  });

  it('renews held pins only and grants nothing for an unknown chain', () => {
    const pool = filled(2, [10n]);
    expect(pool.requestPin('none', [5n]).blocks.length).toBe(0);
    expect(pool.renewPin('none')).toBe(false);
    pool.requestPin('p', [10n]);
    expect(pool.renewPin('p')).toBe(true);
    expect(() => pool.requestPin('p', [10n])).toThrow(EndpointOptionError);
  });

  it('commits a hash it already holds onto the held slot and frees the new one', () => {
    const pool = filled(2, [10n]);
    const slot = pool.allocate();
    expect(pool.commit(slot, 10n)).toBe(0);
    expect(pool.allocate()).toBe(slot);
  });

  it('refuses a bad slot count and a commit to a slot it did not allocate', () => {
    expect(() => new BlockPool(0)).toThrow(EndpointOptionError);
    const pool = new BlockPool(1);
    expect(() => pool.commit(0, 1n)).toThrow('slot = 0 is refused');
  });

  it('stops calling an unsubscribed eviction listener', () => {
    const pool = filled(1, [10n]);
    const evicted: EvictedBlock[] = [];
    const unsubscribe = pool.onEvicted((blocks) => evicted.push(...blocks));
    unsubscribe();
    pool.allocate();
    expect(evicted).toEqual([]);
  });

  it('an eviction listener that throws is reported as a warning: the slot is still handed out and the others hear of it', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const pool = filled(2, [10n, 11n]);
      const evicted: EvictedBlock[] = [];
      pool.onEvicted(() => {
        throw new Error('listener broke');
      });
      pool.onEvicted((blocks) => evicted.push(...blocks));
      expect(pool.allocate()).toBe(0);
      expect(evicted).toEqual([{ block: 0, hash: 10n }]);
      expect(warn.mock.calls.map(([message]) => message)).toEqual([
        'endpoint: an eviction listener threw: listener broke',
      ]);
      // No slot was lost: both go round again, nothing being pinned.
      pool.commit(0, 20n);
      expect(pool.allocate()).toBe(1);
      pool.commit(1, 21n);
      expect(pool.allocate()).toBe(0);
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses an eviction listener that is no function, adding nothing', () => {
    const pool = filled(1, [10n]);
    expect(() => pool.onEvicted('log' as never)).toThrow(new EndpointOptionError('listener', 'log', 'a function'));
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      expect(pool.allocate()).toBe(0);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses a hash that is no 64-bit bigint and keeps the slot allocated for a commit that is', () => {
    const pool = new BlockPool(1);
    const slot = pool.allocate();
    for (const hash of [5, -1n, 1n << 64n])
      expect(() => pool.commit(slot, hash as bigint)).toThrow(
        new EndpointOptionError('hash', hash, "the block's chain hash, a bigint of 0 to 2^64 - 1"),
      );
    expect(pool.retained()).toEqual([]);
    expect(pool.commit(slot, 20n)).toBe(slot);
    expect(pool.retained()).toEqual([20n]);
  });
});
