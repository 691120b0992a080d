import type { RetentionTier } from '@kvreuse/inventory';
import type { EngineBlockHash } from './engine-event.js';
import { EngineHashIndex } from './engine-hash-index.js';

/** What the journal takes back: a worker's index of blocks and its counts per tier. */
export interface JournaledBlocks {
  chains: EngineHashIndex;
  readonly held: Record<RetentionTier, number>;
}

/**
 * The changes one batch makes to a worker's blocks, so that a batch the inventory refuses can be taken
 * back: the feed's index then stays what the inventory holds. Reused from batch to batch: recording a
 * change stores into arrays it keeps, and allocates nothing per block once they have grown.
 */
export class FeedJournal {
  // Per change, oldest first: the engine hash (null for a cleared index), the tiers it gained (> 0) or
  // lost (< 0), and for a loss the chain hash words it was held under.
  readonly #hashes: (EngineBlockHash | null)[] = [];
  readonly #tiers: number[] = [];
  readonly #chainWords: number[] = [];
  /** Each index a clear replaced, oldest first. */
  readonly #replaced: EngineHashIndex[] = [];
  #gpu = 0;
  #host = 0;

  begin(blocks: JournaledBlocks): void {
    this.#hashes.length = 0;
    this.#tiers.length = 0;
    this.#chainWords.length = 0;
    this.#replaced.length = 0;
    this.#gpu = blocks.held.gpu;
    this.#host = blocks.held.host;
  }

  gained(hash: EngineBlockHash, tierBit: number): void {
    this.#record(hash, tierBit, 0, 0);
  }

  lost(hash: EngineBlockHash, tierBits: number, chainLo: number, chainHi: number): void {
    this.#record(hash, -tierBits, chainLo, chainHi);
  }

  /** Empties the worker's index by giving it a new one, keeping the old one to take back. */
  clear(blocks: JournaledBlocks): void {
    this.#replaced.push(blocks.chains);
    this.#record(null, 0, 0, 0);
    blocks.chains = new EngineHashIndex();
    blocks.held.gpu = 0;
    blocks.held.host = 0;
  }

  /** Undoes every change since `begin`, newest first. */
  takeBack(blocks: JournaledBlocks): void {
    for (let i = this.#hashes.length - 1; i >= 0; i--) {
      const hash = this.#hashes[i]!;
      const tiers = this.#tiers[i]!;
      if (hash === null) blocks.chains = this.#replaced.pop()!;
      else if (tiers > 0) blocks.chains.release(blocks.chains.find(hash), tiers);
      else blocks.chains.hold(hash, this.#chainWords[2 * i]!, this.#chainWords[2 * i + 1]!, -tiers);
    }
    blocks.held.gpu = this.#gpu;
    blocks.held.host = this.#host;
  }

  #record(hash: EngineBlockHash | null, tiers: number, chainLo: number, chainHi: number): void {
    this.#hashes.push(hash);
    this.#tiers.push(tiers);
    this.#chainWords.push(chainLo, chainHi);
  }
}
