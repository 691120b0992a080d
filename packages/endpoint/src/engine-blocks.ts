// The pin adapter of an engine's adopted banks: which block holds which hash, as the engine says in its
// `adopt` and `blocks` messages. The engine owns the memory and is not told of pins: a pin it outran (the
// block removed or rewritten) is not renewed, and the reader's verification catches a block rewritten
// between the grant and the read.
import { EndpointOptionError } from './errors.js';
import { checkFunction } from './argument-shapes.js';
import { tellEach } from './listeners.js';
import type { AdapterGrant, EvictedBlock, PinAdapter } from './pin-adapter.js';
import type { StoredBlock } from './adoption-messages.js';

export class EngineBlocks implements PinAdapter {
  readonly #hashOfBlock = new Map<number, bigint>();
  readonly #blockOfHash = new Map<bigint, number>();
  /** Each held pin's blocks and the hashes they held when granted. */
  readonly #pins = new Map<string, readonly StoredBlock[]>();
  readonly #listeners = new Set<(evicted: readonly EvictedBlock[]) => void>();
  #gone = false;

  /**
   * Records what the engine stored; a block that held another hash reports that one evicted. A block named
   * twice holds the last hash it is named with.
   */
  store(stored: readonly StoredBlock[]): void {
    const evicted = this.#take(stored.map(({ block }) => block));
    for (const { block, hash } of stored) {
      // The block named earlier in this batch with another hash holds this one now: that hash is not found there.
      const replaced = this.#hashOfBlock.get(block);
      if (replaced !== undefined && this.#blockOfHash.get(replaced) === block) this.#blockOfHash.delete(replaced);
      const previous = this.#blockOfHash.get(hash);
      if (previous !== undefined) this.#hashOfBlock.delete(previous);
      this.#hashOfBlock.set(block, hash);
      this.#blockOfHash.set(hash, block);
    }
    this.#report(evicted.filter(({ block, hash }) => this.#hashOfBlock.get(block) !== hash));
  }

  /** Records blocks the engine no longer holds. */
  remove(blocks: readonly number[]): void {
    this.#report(this.#take(blocks));
  }

  /** The engine went away: nothing is granted or renewed from now on. */
  gone(): void {
    this.#gone = true;
  }

  /** The hashes of every block held, in block order (what the inventory announces). */
  retained(): bigint[] {
    return [...this.#hashOfBlock.entries()].sort(([a], [b]) => a - b).map(([, hash]) => hash);
  }

  requestPin(pinId: string, hashes: readonly bigint[]): AdapterGrant {
    if (this.#pins.has(pinId)) throw new EndpointOptionError('pinId', pinId, 'a pin id not already held');
    const granted: StoredBlock[] = [];
    if (!this.#gone) {
      for (const hash of hashes) {
        const block = this.#blockOfHash.get(hash);
        if (block === undefined) break;
        granted.push({ block, hash });
      }
    }
    if (granted.length > 0) this.#pins.set(pinId, granted);
    return { blocks: Uint32Array.from(granted, ({ block }) => block) };
  }

  renewPin(pinId: string): boolean {
    const blocks = this.#pins.get(pinId);
    return (
      !this.#gone && blocks !== undefined && blocks.every(({ block, hash }) => this.#hashOfBlock.get(block) === hash)
    );
  }

  releasePin(pinId: string): void {
    this.#pins.delete(pinId);
  }

  cancelPin(pinId: string): void {
    this.#pins.delete(pinId);
  }

  onEvicted(listener: (evicted: readonly EvictedBlock[]) => void): () => void {
    checkFunction('listener', listener);
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #take(blocks: readonly number[]): EvictedBlock[] {
    const taken: EvictedBlock[] = [];
    for (const block of blocks) {
      const hash = this.#hashOfBlock.get(block);
      if (hash === undefined) continue;
      this.#hashOfBlock.delete(block);
      if (this.#blockOfHash.get(hash) === block) this.#blockOfHash.delete(hash);
      taken.push({ block, hash });
    }
    return taken;
  }

  #report(evicted: readonly EvictedBlock[]): void {
    if (evicted.length === 0) return;
    // One that throws does not stop the others, nor the rest of the engine's message.
    tellEach(this.#listeners, evicted, 'an eviction listener');
  }
}
