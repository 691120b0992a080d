import { describe, expect, it, vi } from 'vitest';
import type { EvictedBlock } from './pin-adapter.js';
import { EngineBlocks } from './engine-blocks.js';
import { EndpointOptionError } from './errors.js';

describe('EngineBlocks', () => {
  it('grants the longest prefix the engine holds, renews while every block holds its hash, and reports what changed', () => {
    const blocks = new EngineBlocks();
    const evicted: EvictedBlock[][] = [];
    blocks.onEvicted((batch) => evicted.push([...batch]));
    blocks.store([
      { block: 2, hash: 20n },
      { block: 0, hash: 10n },
      { block: 5, hash: 30n },
    ]);
    expect(blocks.retained()).toEqual([10n, 20n, 30n]);
    expect(blocks.requestPin('p', [10n, 20n, 99n, 30n]).blocks).toEqual(Uint32Array.of(0, 2));
    expect(blocks.requestPin('none', [99n]).blocks).toEqual(new Uint32Array(0));
    expect(blocks.renewPin('p')).toBe(true);
    blocks.store([{ block: 2, hash: 21n }]); // the engine rewrote a pinned block
    expect(evicted).toEqual([[{ block: 2, hash: 20n }]]);
    expect(blocks.renewPin('p')).toBe(false);
    blocks.remove([5, 6]);
    expect(evicted.at(-1)).toEqual([{ block: 5, hash: 30n }]);
    expect(blocks.retained()).toEqual([10n, 21n]);
    blocks.releasePin('p');
    expect(blocks.renewPin('p')).toBe(false);
  });

  it('grants and renews nothing once the engine is gone', () => {
    const blocks = new EngineBlocks();
    blocks.store([{ block: 0, hash: 10n }]);
    expect(blocks.requestPin('p', [10n]).blocks).toEqual(Uint32Array.of(0));
    blocks.gone();
    expect(blocks.renewPin('p')).toBe(false);
    expect(blocks.requestPin('q', [10n]).blocks).toEqual(new Uint32Array(0));
  });

  it('a message naming one block twice leaves it holding the last hash only: the first is never granted from it', () => {
    const blocks = new EngineBlocks();
    // Two sequences of one message both naming block 1 (or a `stored` entry and a sequence): it holds 20 now.
    blocks.store([
      { block: 1, hash: 10n },
      { block: 1, hash: 20n },
    ]);
    expect(blocks.retained()).toEqual([20n]);
    expect(blocks.requestPin('p', [10n]).blocks).toEqual(new Uint32Array(0));
    expect(blocks.requestPin('q', [20n]).blocks).toEqual(Uint32Array.of(1));
    // Stored again elsewhere later, hash 10 is granted from there.
    blocks.store([{ block: 3, hash: 10n }]);
    expect(blocks.requestPin('r', [10n]).blocks).toEqual(Uint32Array.of(3));
    expect(blocks.retained()).toEqual([20n, 10n]);
  });

  it('an eviction listener that throws is reported as a warning: the others hear of it and the message is recorded whole', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const blocks = new EngineBlocks();
      blocks.store([
        { block: 0, hash: 10n },
        { block: 1, hash: 11n },
      ]);
      const evicted: EvictedBlock[][] = [];
      blocks.onEvicted(() => {
        throw new Error('listener broke');
      });
      blocks.onEvicted((batch) => evicted.push([...batch]));
      // What the sidecar does with a `blocks` message: its removed, then its stored.
      blocks.remove([0]);
      blocks.store([{ block: 1, hash: 12n }]);
      expect(evicted).toEqual([[{ block: 0, hash: 10n }], [{ block: 1, hash: 11n }]]);
      expect(blocks.retained()).toEqual([12n]);
      expect(warn.mock.calls.map(([message]) => message)).toEqual([
        'endpoint: an eviction listener threw: listener broke',
        'endpoint: an eviction listener threw: listener broke',
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses an eviction listener that is no function, adding nothing', () => {
    const blocks = new EngineBlocks();
    expect(() => blocks.onEvicted(null as never)).toThrow(new EndpointOptionError('listener', null, 'a function'));
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      blocks.store([{ block: 0, hash: 10n }]);
      blocks.remove([0]);
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses a pin id already held, keeping that pin as it was', () => {
    const blocks = new EngineBlocks();
    blocks.store([
      { block: 0, hash: 10n },
      { block: 1, hash: 11n },
    ]);
    expect(blocks.requestPin('p', [10n, 11n]).blocks).toEqual(Uint32Array.of(0, 1));
    expect(() => blocks.requestPin('p', [10n])).toThrow(
      new EndpointOptionError('pinId', 'p', 'a pin id not already held'),
    );
    // The pin still holds both blocks: rewriting the second one ends its renewal.
    blocks.store([{ block: 1, hash: 12n }]);
    expect(blocks.renewPin('p')).toBe(false);
  });
});
