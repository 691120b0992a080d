import {
  type BlockHashScheme,
  hashBlockChain,
  type InventoryEvent,
  RetainedInventory,
  type RetentionTier,
} from '@kvreuse/inventory';
import { checkEventBatch } from './batch-shape.js';
import type { BlockRemoved, BlockStored, EngineBlockHash, EngineEventBatch } from './engine-event.js';
import { checkEngineHash, EngineHashIndex } from './engine-hash-index.js';
import { EngineEventsInputError } from './errors.js';
import { FeedJournal } from './feed-journal.js';

/** Why blocks an engine announced are not in the inventory. Stable codes. */
export type SkipReason =
  'medium' | 'group' | 'extra-keys' | 'block-size' | 'token-count' | 'token-range' | 'unknown-parent' | 'unknown-block';
export const skipReasons: readonly SkipReason[] = [
  'medium',
  'group',
  'extra-keys',
  'block-size',
  'token-count',
  'token-range',
  'unknown-parent',
  'unknown-block',
];

/** The engine media the inventory's tiers stand for: vLLM's `GPU` and `CPU`, SGLang's `CPU_PINNED`; nil is the GPU. */
const tierOfMedium = new Map<string | null, RetentionTier>([
  [null, 'gpu'],
  ['GPU', 'gpu'],
  ['CPU', 'host'],
  ['CPU_PINNED', 'host'],
]);
const tierBit: Record<RetentionTier, number> = { gpu: 1, host: 2 };
const maxSalt = (1n << 64n) - 1n;

type Skipped = Partial<Record<SkipReason, number>>;
/** Counts `blocks` left out for `reason` (a function, not a closure per batch: nothing to allocate). */
function skip(skipped: Skipped, reason: SkipReason, blocks: number): void {
  skipped[reason] = (skipped[reason] ?? 0) + blocks;
}

interface FeedWorker {
  incarnation: string;
  epoch: number;
  seq: number;
  restarts: number;
  chains: EngineHashIndex;
  /** Blocks indexed per tier. */
  readonly held: Record<RetentionTier, number>;
}

function forgetBlocks(worker: FeedWorker): void {
  worker.chains.clear();
  worker.held.gpu = 0;
  worker.held.host = 0;
}

/** What one batch did: blocks indexed and dropped, and blocks left out, by reason. */
export interface FeedOutcome {
  readonly stored: number;
  readonly removed: number;
  readonly cleared: boolean;
  readonly skipped: Readonly<Partial<Record<SkipReason, number>>>;
  /**
   * The inventory ignored the batch (it holds a newer epoch of the worker's, or a later batch of its
   * incarnation): nothing of it was indexed, and the other counts are 0.
   */
  readonly ignored: boolean;
}

const ignoredBatch: FeedOutcome = Object.freeze({
  stored: 0,
  removed: 0,
  cleared: false,
  skipped: Object.freeze({}),
  ignored: true,
});

export interface EngineInventoryFeedOptions {
  readonly inventory: RetainedInventory;
  /** How kvreuse hashes this model's blocks (`blockHashScheme` of @kvreuse/inventory). */
  readonly scheme: BlockHashScheme;
  /**
   * How long a stored block is announced for (ms, default 30 minutes): an engine says when it evicts a
   * block, so this only bounds what a lost removal or a silent engine leaves behind. Storing it again renews it.
   */
  readonly retainMs?: number;
  /** Wall clock in ms since the Unix epoch (default `Date.now`). */
  readonly now?: () => number;
  /** The incarnation an engine worker is announced under after `restarts` publisher restarts (default `<workerId>#<restarts>`). */
  readonly incarnationOf?: (workerId: string, restarts: number) => string;
}

/**
 * Feeds the events of engine workers into a retained inventory, each worker under its own id and
 * incarnation. An engine hashes blocks its own way (another function, seed or extra keys); the feed
 * rehashes each stored block from its token ids with kvreuse's chain hash and keeps, per worker, the
 * map from the engine's hash to kvreuse's, so that a removal finds the block and a prompt hashed by
 * kvreuse meets the engine's blocks. Blocks whose hash depends on more than their tokens (a LoRA,
 * multimodal inputs, a cache salt), of a group other than the first, of another block size or on a
 * medium that is not GPU or host memory are left out and counted (`FeedOutcome.skipped`).
 */
export class EngineInventoryFeed {
  readonly #inventory: RetainedInventory;
  readonly #scheme: BlockHashScheme;
  readonly #retainMs: number;
  readonly #now: () => number;
  readonly #incarnationOf: (workerId: string, restarts: number) => string;
  readonly #workers = new Map<string, FeedWorker>();
  readonly #journal = new FeedJournal();

  constructor(options: EngineInventoryFeedOptions) {
    if (options === null || typeof options !== 'object')
      throw new EngineEventsInputError('options', options, 'options are { inventory, scheme, … }');
    const { retainMs = 30 * 60_000, now = Date.now, incarnationOf = (id, restarts) => `${id}#${restarts}` } = options;
    if (!Number.isSafeInteger(retainMs) || retainMs < 1)
      throw new EngineEventsInputError('options.retainMs', retainMs, 'a retention is a whole number of ms ≥ 1');
    const { inventory, scheme } = options;
    if (!(inventory instanceof RetainedInventory))
      throw new EngineEventsInputError('options.inventory', inventory, 'a RetainedInventory of @kvreuse/inventory');
    if (
      scheme === null ||
      typeof scheme !== 'object' ||
      typeof scheme.salt !== 'bigint' ||
      scheme.salt < 0n ||
      scheme.salt > maxSalt ||
      !Number.isSafeInteger(scheme.blockTokens) ||
      scheme.blockTokens < 1
    )
      throw new EngineEventsInputError(
        'options.scheme',
        scheme,
        'a scheme is { salt: a bigint from 0 to 2^64 − 1, blockTokens: a whole number ≥ 1 } (blockHashScheme of @kvreuse/inventory)',
      );
    if (typeof now !== 'function') throw new EngineEventsInputError('options.now', now, 'a clock is a function');
    if (typeof incarnationOf !== 'function')
      throw new EngineEventsInputError(
        'options.incarnationOf',
        incarnationOf,
        'a function of a worker id and restarts',
      );
    this.#inventory = inventory;
    this.#scheme = scheme;
    this.#retainMs = retainMs;
    this.#now = now;
    this.#incarnationOf = incarnationOf;
  }

  /** The incarnation and epoch the worker's blocks are announced under now, or undefined before its first batch. */
  identity(workerId: string): { readonly incarnation: string; readonly epoch: number } | undefined {
    const worker = this.#workers.get(workerId);
    return worker && { incarnation: worker.incarnation, epoch: worker.epoch };
  }

  /** kvreuse's chain hash of a block the worker announced, by the engine's hash; undefined if not indexed. */
  kvreuseHashOf(workerId: string, engineHash: bigint | Uint8Array): bigint | undefined {
    checkEngineHash('engineHash', engineHash);
    const chains = this.#workers.get(workerId)?.chains;
    const slot = chains?.find(engineHash) ?? -1;
    return slot < 0 ? undefined : chains!.chainAt(slot);
  }

  /** How many of the worker's blocks are indexed, per tier. */
  heldBlocks(workerId: string): Readonly<Record<RetentionTier, number>> {
    const held = this.#workers.get(workerId)?.held;
    return { gpu: held?.gpu ?? 0, host: held?.host ?? 0 };
  }

  /**
   * Applies one decoded batch of the worker's, all or nothing: a batch the inventory refuses (its
   * error is thrown) or ignores (`FeedOutcome.ignored`) leaves the worker's index as it was.
   */
  apply(workerId: string, batch: EngineEventBatch): FeedOutcome {
    checkEventBatch(batch);
    const worker = this.#worker(workerId);
    this.#journal.begin(worker);
    let outcome: FeedOutcome;
    try {
      outcome = this.#apply(workerId, worker, batch);
    } catch (error) {
      this.#journal.takeBack(worker);
      throw error;
    }
    this.#workers.set(workerId, worker);
    return outcome;
  }

  #apply(workerId: string, worker: FeedWorker, batch: EngineEventBatch): FeedOutcome {
    const skipped: Skipped = {};
    const events: InventoryEvent[] = [];
    let stored = 0;
    let removed = 0;
    let cleared = false;
    const expiresAt = this.#now() + this.#retainMs;
    for (const event of batch.events) {
      if (event.type === 'AllBlocksCleared') {
        this.#journal.clear(worker);
        events.push({ type: 'cleared', tier: 'gpu' }, { type: 'cleared', tier: 'host' });
        cleared = true;
      } else if (event.type === 'BlockStored') {
        const blocks = this.#stored(worker, event, skipped, events);
        if (blocks !== undefined) {
          events.push({ type: 'stored', tier: blocks.tier, blocks: blocks.chain, expiresAt });
          stored += blocks.chain.length;
          removed += blocks.moved;
        }
      } else {
        const blocks = this.#removed(worker, event, skipped);
        if (blocks !== undefined && blocks.hashes.length > 0) {
          events.push({ type: 'removed', tier: blocks.tier, blocks: blocks.hashes });
          removed += blocks.hashes.length;
        }
      }
    }
    const seq = worker.seq + 1;
    if (!this.#inventory.apply({ workerId, incarnation: worker.incarnation, epoch: worker.epoch, seq, events })) {
      this.#journal.takeBack(worker);
      return ignoredBatch;
    }
    worker.seq = seq;
    return { stored, removed, cleared, skipped, ignored: false };
  }

  /**
   * The worker's publisher restarted: everything it announced is dropped, and its blocks are
   * announced from now on under a new incarnation (a larger epoch). All or nothing: a restart the
   * inventory refuses (its error is thrown) or ignores (false) leaves the worker as it was.
   */
  restart(workerId: string): boolean {
    const worker = this.#worker(workerId);
    const restarts = worker.restarts + 1;
    const epoch = worker.epoch + 1;
    const incarnation = this.#incarnationOf(workerId, restarts);
    const applied = this.#inventory.apply({ workerId, incarnation, epoch, seq: 0, events: [] });
    this.#workers.set(workerId, worker);
    if (!applied) return false;
    worker.restarts = restarts;
    worker.epoch = epoch;
    worker.incarnation = incarnation;
    worker.seq = 0;
    forgetBlocks(worker);
    return true;
  }

  /** Forgets the worker and everything it announced. */
  forget(workerId: string): boolean {
    this.#workers.delete(workerId);
    return this.#inventory.removeWorker(workerId);
  }

  /** The worker, or a new one that the caller keeps (`#workers`) only if the inventory does not refuse its first change. */
  #worker(workerId: string): FeedWorker {
    const worker = this.#workers.get(workerId);
    if (worker !== undefined) return worker;
    if (typeof workerId !== 'string' || workerId.length === 0)
      throw new EngineEventsInputError('workerId', workerId, 'a worker id is a non-empty string');
    return {
      incarnation: this.#incarnationOf(workerId, 0),
      epoch: 1,
      seq: 0,
      restarts: 0,
      chains: new EngineHashIndex(),
      held: { gpu: 0, host: 0 },
    };
  }

  /** Indexes a run of stored blocks; the removals of blocks whose hash it moves go to `events` (see `#move`). */
  #stored(
    worker: FeedWorker,
    event: BlockStored,
    skipped: Skipped,
    events: InventoryEvent[],
  ): { tier: RetentionTier; chain: BigUint64Array; moved: number } | undefined {
    const count = event.blockHashes.length;
    const reason = this.#refusal(event);
    if (reason !== undefined) return void skip(skipped, reason, count);
    const tier = tierOfMedium.get(event.medium)!;
    let parent = 0n;
    if (event.parentBlockHash !== null) {
      const slot = worker.chains.find(event.parentBlockHash);
      if (slot < 0) return void skip(skipped, 'unknown-parent', count);
      parent = worker.chains.chainAt(slot);
    }
    let chain: BigUint64Array;
    try {
      chain = hashBlockChain(event.tokenIds, this.#scheme, parent);
    } catch {
      return void skip(skipped, 'token-range', count);
    }
    const words = new Uint32Array(chain.buffer, chain.byteOffset, 2 * count);
    const bit = tierBit[tier];
    let held = 0;
    let moved = 0;
    for (let i = 0; i < count; i++) {
      const hash = event.blockHashes[i]!;
      const slot = worker.chains.find(hash);
      if (slot >= 0 && !worker.chains.chainIs(slot, words[2 * i]!, words[2 * i + 1]!))
        moved += this.#move(worker, hash, slot, events);
      if (worker.chains.hold(hash, words[2 * i]!, words[2 * i + 1]!, bit)) {
        this.#journal.gained(hash, bit);
        held += 1;
      }
    }
    worker.held[tier] += held;
    return { tier, chain, moved };
  }

  /**
   * The engine stored `hash` again as another block (another parent or other tokens): the block the
   * hash stood for is no longer the engine's under it, and is removed from every tier it was held on, as
   * the engine's BlockRemoved would. Returns how many (block, tier) it removed.
   */
  #move(worker: FeedWorker, hash: EngineBlockHash, slot: number, events: InventoryEvent[]): number {
    const tiers = worker.chains.tiersAt(slot);
    const chain = worker.chains.chainAt(slot);
    this.#journal.lost(hash, tiers, Number(chain & 0xffff_ffffn), Number(chain >> 32n));
    worker.chains.release(slot, tiers);
    let removed = 0;
    for (const tier of ['gpu', 'host'] as const) {
      if ((tiers & tierBit[tier]) === 0) continue;
      events.push({ type: 'removed', tier, blocks: BigUint64Array.of(chain) });
      worker.held[tier] -= 1;
      removed += 1;
    }
    return removed;
  }

  #refusal(event: BlockStored): SkipReason | undefined {
    if (!tierOfMedium.has(event.medium)) return 'medium';
    if (event.groupIdx !== null && event.groupIdx !== 0) return 'group';
    if (event.loraId !== null || event.loraName !== null || event.extraKeys?.some((keys) => keys !== null))
      return 'extra-keys';
    if (event.blockSize !== this.#scheme.blockTokens) return 'block-size';
    if (event.tokenIds.length !== event.blockHashes.length * event.blockSize) return 'token-count';
    return undefined;
  }

  #removed(
    worker: FeedWorker,
    event: BlockRemoved,
    skipped: Skipped,
  ): { tier: RetentionTier; hashes: BigUint64Array } | undefined {
    const tier = tierOfMedium.get(event.medium);
    if (tier === undefined) return void skip(skipped, 'medium', event.blockHashes.length);
    if (event.groupIdx !== null && event.groupIdx !== 0) return void skip(skipped, 'group', event.blockHashes.length);
    const hashes = new BigUint64Array(event.blockHashes.length);
    const words = new Uint32Array(hashes.buffer);
    const bit = tierBit[tier];
    let found = 0;
    for (const hash of event.blockHashes) {
      const slot = worker.chains.find(hash);
      if (slot < 0 || (worker.chains.tiersAt(slot) & bit) === 0) {
        skip(skipped, 'unknown-block', 1);
        continue;
      }
      worker.chains.chainInto(slot, words, found);
      this.#journal.lost(hash, bit, words[2 * found]!, words[2 * found + 1]!);
      worker.chains.release(slot, bit);
      found += 1;
    }
    worker.held[tier] -= found;
    return { tier, hashes: found === hashes.length ? hashes : hashes.subarray(0, found) };
  }
}
