// A reference block pool: the framework side of pins for the demo and the tests. Fixed slots, blocks
// named by their chain hash, LRU eviction of retained blocks that never evicts a pinned one.
import { isChainHash } from './chain-hash.js';
import { AllBlocksPinnedError, EndpointOptionError } from './errors.js';
import { checkFunction } from './argument-shapes.js';
import { tellEach } from './listeners.js';
import type { AdapterGrant, EvictedBlock, PinAdapter } from './pin-adapter.js';

export class BlockPool implements PinAdapter {
  readonly slotCount: number;
  readonly #free: number[] = [];
  readonly #allocated = new Set<number>();
  readonly #slotOfHash = new Map<bigint, number>();
  readonly #hashOfSlot = new Map<number, bigint>();
  /** Committed slots, least recently used first (a Map keeps insertion order). */
  readonly #recency = new Map<number, true>();
  readonly #pinCount = new Map<number, number>();
  readonly #pins = new Map<string, Uint32Array>();
  readonly #evictionListeners = new Set<(evicted: readonly EvictedBlock[]) => void>();

  constructor(slotCount: number) {
    if (!Number.isSafeInteger(slotCount) || slotCount < 1 || slotCount > 0xffffffff) {
      throw new EndpointOptionError('slotCount', slotCount, 'a whole number of block slots, 1 to 2^32 - 1');
    }
    this.slotCount = slotCount;
    for (let slot = slotCount - 1; slot >= 0; slot--) this.#free.push(slot);
  }

  /** A slot to write a new block into: a free one, else the least recently used unpinned block, evicted. */
  allocate(): number {
    let slot = this.#free.pop();
    if (slot === undefined) slot = this.#evictLeastRecentlyUsed();
    this.#allocated.add(slot);
    return slot;
  }

  /**
   * Records that `slot` (from `allocate`) now holds the block with chain hash `hash`. When the pool
   * already holds that hash, the new slot goes back to the free list and the held one is returned. A hash
   * that is no bigint of 64 bits is refused (`EndpointOptionError`) and the slot stays allocated.
   */
  commit(slot: number, hash: bigint): number {
    if (!isChainHash(hash))
      throw new EndpointOptionError('hash', hash, "the block's chain hash, a bigint of 0 to 2^64 - 1");
    if (!this.#allocated.delete(slot)) {
      throw new EndpointOptionError('slot', slot, 'a slot returned by allocate() and not committed since');
    }
    const held = this.#slotOfHash.get(hash);
    if (held !== undefined) {
      this.#free.push(slot);
      this.#touch(held);
      return held;
    }
    this.#slotOfHash.set(hash, slot);
    this.#hashOfSlot.set(slot, hash);
    this.#touch(slot);
    return slot;
  }

  /** The hashes of every block the pool holds, least recently used first (what its inventory announces). */
  retained(): bigint[] {
    return [...this.#recency.keys()].map((slot) => this.#hashOfSlot.get(slot) as bigint);
  }

  /** The slots of the longest prefix of `hashes` the pool holds, in order. */
  lookup(hashes: readonly bigint[]): Uint32Array {
    const slots: number[] = [];
    for (const hash of hashes) {
      const slot = this.#slotOfHash.get(hash);
      if (slot === undefined) break;
      slots.push(slot);
    }
    return Uint32Array.from(slots);
  }

  /** How many pins hold `slot`. */
  pinsOn(slot: number): number {
    return this.#pinCount.get(slot) ?? 0;
  }

  requestPin(pinId: string, hashes: readonly bigint[]): AdapterGrant {
    if (this.#pins.has(pinId)) throw new EndpointOptionError('pinId', pinId, 'a pin id not already held');
    const blocks = this.lookup(hashes);
    for (const slot of blocks) {
      this.#pinCount.set(slot, this.pinsOn(slot) + 1);
      this.#touch(slot);
    }
    if (blocks.length > 0) this.#pins.set(pinId, blocks);
    return { blocks };
  }

  renewPin(pinId: string): boolean {
    return this.#pins.has(pinId);
  }

  releasePin(pinId: string): void {
    const blocks = this.#pins.get(pinId);
    if (blocks === undefined) return;
    this.#pins.delete(pinId);
    for (const slot of blocks) {
      const count = this.pinsOn(slot) - 1;
      if (count === 0) this.#pinCount.delete(slot);
      else this.#pinCount.set(slot, count);
    }
  }

  cancelPin(pinId: string): void {
    this.releasePin(pinId);
  }

  onEvicted(listener: (evicted: readonly EvictedBlock[]) => void): () => void {
    checkFunction('listener', listener);
    this.#evictionListeners.add(listener);
    return () => this.#evictionListeners.delete(listener);
  }

  #touch(slot: number): void {
    this.#recency.delete(slot);
    this.#recency.set(slot, true);
  }

  #evictLeastRecentlyUsed(): number {
    for (const slot of this.#recency.keys()) {
      if (this.pinsOn(slot) > 0) continue;
      const hash = this.#hashOfSlot.get(slot) as bigint;
      this.#recency.delete(slot);
      this.#hashOfSlot.delete(slot);
      this.#slotOfHash.delete(hash);
      tellEach(this.#evictionListeners, [{ block: slot, hash }], 'an eviction listener');
      return slot;
    }
    throw new AllBlocksPinnedError(this.slotCount, this.#allocated.size);
  }
}
