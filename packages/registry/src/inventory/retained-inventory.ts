import { InventoryEventError } from '../errors.js';
import { type InventoryBatch, type InventoryEvent, type RetentionTier, retentionTiers } from './events.js';

/**
 * One worker's retained prefix of a hash chain. Advisory: the blocks may already be evicted, the
 * entries expire, and nothing is reserved — only a pin at the source proves the blocks are there.
 */
export interface AdvisoryRetainedPrefix {
  readonly workerId: string;
  readonly incarnation: string;
  /** How many leading blocks of the chain the worker retains, on either tier. */
  readonly blocks: number;
  /** How many of those blocks it retains on the GPU (a block can be on both tiers). */
  readonly gpuBlocks: number;
  /** How many of those blocks it retains in host memory. */
  readonly hostBlocks: number;
  /** The earliest expiry among those blocks (ms since the Unix epoch, to the inventory's 100 ms tick). */
  readonly expiresAt: number;
}

export interface RetainedInventoryOptions {
  /** Wall clock in ms since the Unix epoch (default `Date.now`); expiries are compared with it. */
  readonly now?: () => number;
  /** Blocks to make room for up front (default 1,024); the index grows as needed anyway. */
  readonly expectedBlocks?: number;
}

// The table: open addressing (linear probing) keyed by the 64-bit block hash. A slot holds the hash
// and the first worker that retains the block, inline, so a lookup touches one cache line per
// block in the common case; further workers of the same block go to an overflow slab.
const slotWords = 6;
const slotLo = 0;
const slotHi = 1;
const slotWorker = 2; // worker index + 1; 0 = empty slot
const slotGpu = 3; // expiry tick on the GPU tier; 0 = not retained there
const slotHost = 4; // expiry tick on the host tier
const slotMore = 5; // first overflow entry + 1; 0 = none
// Overflow entries: another worker that retains the same block.
const moreWords = 4;
const moreWorker = 0; // worker index (not + 1)
const moreGpu = 1;
const moreHost = 2;
const moreNext = 3; // next overflow entry + 1; 0 = none
const tierOffset: Record<RetentionTier, 0 | 1> = { gpu: 0, host: 1 };
const tickMs = 100;
const maxTick = 0x7fffffff; // ticks stay small integers: 2^31 × 100 ms is 6.8 years
const maxLoad = 0.8;
/** Up to this many workers on a chain's first block, a lookup follows each one on its own. */
const followEachLimit = 8;
const growth = 1.5; // of the overflow slab; the table doubles
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * A chain's hashes as (lo, hi) pairs of 32-bit words, without copying on little-endian machines.
 * Words are kept as int32 everywhere in the index so that V8 never boxes a value above 2^31.
 */
function hashWords(chain: BigUint64Array | readonly bigint[]): Int32Array {
  if (littleEndian && chain instanceof BigUint64Array) {
    return new Int32Array(chain.buffer, chain.byteOffset, chain.length * 2);
  }
  const words = new Int32Array(chain.length * 2);
  for (let i = 0; i < chain.length; i++) {
    const hash = chain[i]!;
    words[2 * i] = Number(hash & 0xffffffffn);
    words[2 * i + 1] = Number(hash >> 32n);
  }
  return words;
}

const maxHash = (1n << 64n) - 1n;

function checkBlocks(path: string, blocks: unknown): BigUint64Array | readonly bigint[] {
  if (blocks instanceof BigUint64Array) return blocks;
  if (!Array.isArray(blocks)) throw new InventoryEventError(path, blocks, 'blocks are a BigUint64Array or an array of bigint');
  blocks.forEach((hash: unknown, i) => {
    if (typeof hash !== 'bigint' || hash < 0n || hash > maxHash) {
      throw new InventoryEventError(`${path}.${i}`, hash, 'a block hash is a bigint from 0 to 2^64 − 1');
    }
  });
  return blocks as readonly bigint[];
}

function grown(array: Int32Array, length: number): Int32Array<ArrayBuffer> {
  const next = new Int32Array(length);
  next.set(array);
  return next;
}

/**
 * The advisory retained inventory: which block hashes each worker retains, on which tier, until
 * when. Compact: a 24-byte table slot per distinct block (a power-of-two table, load 0.4–0.8)
 * holding its first worker,
 * and a 16-byte overflow entry per additional worker of the same block; all in typed arrays.
 * Lookups allocate only their answer. Dropping a worker, a tier of a worker, or expired entries
 * is one pass over the table.
 */
export class RetainedInventory {
  private table: Int32Array;
  private slots: number;
  private mask = 0;
  private homeShift = 32; // 32 − log2(slots): the home slot is the top bits of a multiplicative hash
  private distinctHashes = 0;
  private more: Int32Array<ArrayBuffer>;
  private moreUsed = 0;
  private moreFree = 0; // free overflow entry + 1
  private liveEntries = 0;

  private readonly workerIndex = new Map<string, number>();
  private readonly workerIds: (string | undefined)[] = [];
  private readonly incarnations: string[] = [];
  private readonly lastSeq: number[] = [];
  private readonly freeWorkers: number[] = [];

  // Lookup scratch, indexed by worker (mark, markPos) and by candidate (the rest).
  private mark = new Int32Array(16);
  private markPos = new Int32Array(16);
  private stamp = 0;
  private candidateWorker = new Int32Array(16);
  private candidateDepth = new Int32Array(16);
  private candidateGpu = new Int32Array(16);
  private candidateHost = new Int32Array(16);
  private candidateExpiry = new Int32Array(16);
  private bases = new Int32Array(64);
  private cursors = new Int32Array(64);
  private touched = 0; // kept so that the touching loads are not optimised away

  private readonly now: () => number;
  private readonly epochMs: number;

  constructor(options: RetainedInventoryOptions = {}) {
    this.now = options.now ?? Date.now;
    this.epochMs = this.now();
    const expected = Math.max(16, Math.ceil(options.expectedBlocks ?? 1024));
    this.slots = 0;
    this.table = new Int32Array(0);
    this.resize(2 ** Math.max(5, Math.ceil(Math.log2(expected / maxLoad))));
    this.more = new Int32Array(64 * moreWords);
  }

  /** Retained (block, worker) entries, including expired ones not yet pruned. */
  get size(): number {
    return this.liveEntries;
  }

  get workerCount(): number {
    return this.workerIndex.size;
  }

  /** Bytes held by the index's typed arrays. */
  get indexBytes(): number {
    return this.table.byteLength + this.more.byteLength;
  }

  /**
   * Applies one worker's batch. A batch from a new incarnation first drops everything the worker's
   * previous incarnation retained; a batch whose `seq` is not above the last applied one of the
   * same incarnation is ignored (returns false).
   */
  apply(batch: InventoryBatch): boolean {
    if (batch === null || typeof batch !== 'object') throw new InventoryEventError('', batch, 'a batch is an object');
    const { workerId, incarnation, seq } = batch;
    const events: readonly InventoryEvent[] = batch.events;
    if (typeof workerId !== 'string' || workerId.length === 0) {
      throw new InventoryEventError('workerId', workerId, 'a worker id is a non-empty string');
    }
    if (typeof incarnation !== 'string' || incarnation.length === 0) {
      throw new InventoryEventError('incarnation', incarnation, 'an incarnation is a non-empty string');
    }
    if (!Number.isSafeInteger(seq) || seq < 0) throw new InventoryEventError('seq', seq, 'seq is a whole number ≥ 0');
    if (!Array.isArray(events as unknown)) throw new InventoryEventError('events', events, 'events are an array');
    events.forEach((event: InventoryEvent, i) => this.checkEvent(`events.${i}`, event));

    let worker = this.workerIndex.get(workerId);
    if (worker === undefined) {
      worker = this.addWorker(workerId, incarnation);
    } else if (this.incarnations[worker] !== incarnation) {
      this.removeWhere(worker, [0, 1]);
      this.incarnations[worker] = incarnation;
      this.lastSeq[worker] = -1;
    }
    if (seq <= this.lastSeq[worker]!) return false;
    this.lastSeq[worker] = seq;
    const nowTick = this.tickOf(this.now());
    for (const event of events) {
      const tier = tierOffset[event.tier];
      if (event.type === 'cleared') {
        this.removeWhere(worker, [tier]);
        continue;
      }
      const words = hashWords(event.blocks);
      const expiry = event.type === 'stored' ? Math.min(maxTick, Math.ceil((event.expiresAt - this.epochMs) / tickMs)) : 0;
      for (let i = 0; i < words.length; i += 2) {
        if (expiry > nowTick) this.store(worker, words[i]!, words[i + 1]!, tier, expiry);
        else this.remove(worker, words[i]!, words[i + 1]!, tier);
      }
    }
    return true;
  }

  /** Forgets a worker (its inventory lease ended, or it left). */
  removeWorker(workerId: string): boolean {
    const worker = this.workerIndex.get(workerId);
    if (worker === undefined) return false;
    this.removeWhere(worker, [0, 1]);
    this.workerIndex.delete(workerId);
    this.workerIds[worker] = undefined;
    this.freeWorkers.push(worker);
    return true;
  }

  workers(): string[] {
    return [...this.workerIndex.keys()];
  }

  /** Drops expired entries; returns how many (block, worker) entries were freed. */
  prune(): number {
    const before = this.liveEntries;
    this.removeWhere(-1, [0, 1], this.tickOf(this.now()));
    return before - this.liveEntries;
  }

  /**
   * For each worker that retains at least the chain's first block: how many leading blocks of the
   * chain it retains, on which tier, most blocks first. Advisory only: see `AdvisoryRetainedPrefix`.
   */
  longestRetainedPrefix(chain: BigUint64Array | readonly bigint[]): AdvisoryRetainedPrefix[] {
    const words = hashWords(checkBlocks('chain', chain));
    const blocks = words.length / 2;
    if (this.bases.length < blocks) this.bases = new Int32Array(blocks);
    const bases = this.bases;
    // Touch every block's home slot first, in a loop without branches: the loads do not depend on
    // each other, so in a large index their cache misses overlap instead of queueing one by one
    // (JavaScript has no prefetch instruction; this is one).
    const table = this.table;
    let touched = 0;
    for (let i = 0; i < blocks; i++) touched ^= table[this.home(words[2 * i]!, words[2 * i + 1]!) * slotWords]!;
    this.touched = touched;
    // The slot of every block up to the first one nobody retains.
    let found = 0;
    while (found < blocks) {
      const slot = this.slotOf(words[2 * found]!, words[2 * found + 1]!);
      if (slot < 0) break;
      bases[found++] = slot * slotWords;
    }
    if (found === 0) return [];
    const more = this.more;
    // The same for the overflow lists, one level at a time across all blocks.
    if (this.cursors.length < found) this.cursors = new Int32Array(this.bases.length);
    const cursors = this.cursors;
    for (let depth = 0; depth < found; depth++) cursors[depth] = table[bases[depth]! + slotMore]!;
    for (let level = 0, any = 1; level < followEachLimit && any !== 0; level++) {
      any = 0;
      for (let depth = 0; depth < found; depth++) {
        const m = cursors[depth]!;
        if (m === 0) continue;
        cursors[depth] = more[(m - 1) * moreWords + moreNext]!;
        any |= cursors[depth]!;
      }
    }
    const nowTick = this.tickOf(this.now());
    const answer: AdvisoryRetainedPrefix[] = [];
    let holders = 1;
    for (let m = table[bases[0]! + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) holders++;
    if (holders > followEachLimit) {
      this.followTogether(bases, found, nowTick, answer);
    } else {
      this.followOne(table[bases[0]! + slotWorker]! - 1, bases, found, nowTick, answer);
      for (let m = table[bases[0]! + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
        this.followOne(more[(m - 1) * moreWords + moreWorker]!, bases, found, nowTick, answer);
      }
    }
    return answer.sort((a, b) => b.blocks - a.blocks || (a.workerId < b.workerId ? -1 : 1));
  }

  /** Follows one worker along the resolved blocks while it retains them; adds its prefix if any. */
  private followOne(worker: number, bases: Int32Array, found: number, nowTick: number, answer: AdvisoryRetainedPrefix[]): void {
    const table = this.table;
    const more = this.more;
    let depth = 0;
    let gpuBlocks = 0;
    let hostBlocks = 0;
    let expiry = maxTick;
    for (; depth < found; depth++) {
      const base = bases[depth]!;
      let gpuExpiry: number;
      let hostExpiry: number;
      if (table[base + slotWorker] === worker + 1) {
        gpuExpiry = table[base + slotGpu]!;
        hostExpiry = table[base + slotHost]!;
      } else {
        let m = table[base + slotMore]!;
        while (m !== 0 && more[(m - 1) * moreWords + moreWorker] !== worker) m = more[(m - 1) * moreWords + moreNext]!;
        if (m === 0) break;
        gpuExpiry = more[(m - 1) * moreWords + moreGpu]!;
        hostExpiry = more[(m - 1) * moreWords + moreHost]!;
      }
      const gpu = gpuExpiry > nowTick;
      const host = hostExpiry > nowTick;
      if (!gpu && !host) break;
      if (gpu) {
        gpuBlocks++;
        if (gpuExpiry < expiry) expiry = gpuExpiry;
      }
      if (host) {
        hostBlocks++;
        if (hostExpiry < expiry) expiry = hostExpiry;
      }
    }
    if (depth > 0) answer.push(this.prefix(worker, depth, gpuBlocks, hostBlocks, expiry));
  }

  /**
   * Many workers retain the first block: walk each block's entries once and advance every worker
   * whose prefix reached it (marked per lookup), instead of searching each worker's entry.
   */
  private followTogether(bases: Int32Array, found: number, nowTick: number, answer: AdvisoryRetainedPrefix[]): void {
    const table = this.table;
    const more = this.more;
    const stamp = this.nextStamp();
    let candidates = 0;
    for (let depth = 0; depth < found; depth++) {
      const base = bases[depth]!;
      let advanced = this.visit(table[base + slotWorker]! - 1, table[base + slotGpu]!, table[base + slotHost]!, depth, candidates, stamp, nowTick);
      if (depth === 0) candidates += advanced;
      for (let m = table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
        const at = (m - 1) * moreWords;
        const step = this.visit(more[at + moreWorker]!, more[at + moreGpu]!, more[at + moreHost]!, depth, candidates, stamp, nowTick);
        if (depth === 0) candidates += step;
        advanced += step;
      }
      if (advanced === 0) break;
    }
    for (let c = 0; c < candidates; c++) {
      answer.push(
        this.prefix(this.candidateWorker[c]!, this.candidateDepth[c]!, this.candidateGpu[c]!, this.candidateHost[c]!, this.candidateExpiry[c]!),
      );
    }
  }

  private prefix(worker: number, blocks: number, gpuBlocks: number, hostBlocks: number, expiryTick: number): AdvisoryRetainedPrefix {
    return {
      workerId: this.workerIds[worker]!,
      incarnation: this.incarnations[worker]!,
      blocks,
      gpuBlocks,
      hostBlocks,
      expiresAt: this.epochMs + expiryTick * tickMs,
    };
  }

  /**
   * One (worker, block) entry met at `depth` of a lookup: at depth 0 it makes the worker a
   * candidate, later it extends the worker's prefix if the prefix reached `depth`. Returns 1 if
   * the worker's prefix grew.
   */
  private visit(worker: number, gpuExpiry: number, hostExpiry: number, depth: number, candidates: number, stamp: number, nowTick: number): number {
    const gpu = gpuExpiry > nowTick;
    const host = hostExpiry > nowTick;
    if (!gpu && !host) return 0;
    let c: number;
    if (depth === 0) {
      c = candidates;
      this.mark[worker] = stamp;
      this.markPos[worker] = c;
      this.candidateWorker[c] = worker;
      this.candidateGpu[c] = 0;
      this.candidateHost[c] = 0;
      this.candidateExpiry[c] = maxTick;
    } else {
      if (this.mark[worker] !== stamp) return 0;
      c = this.markPos[worker]!;
      if (this.candidateDepth[c] !== depth) return 0;
    }
    this.candidateDepth[c] = depth + 1;
    if (gpu) {
      this.candidateGpu[c]!++;
      if (gpuExpiry < this.candidateExpiry[c]!) this.candidateExpiry[c] = gpuExpiry;
    }
    if (host) {
      this.candidateHost[c]!++;
      if (hostExpiry < this.candidateExpiry[c]!) this.candidateExpiry[c] = hostExpiry;
    }
    return 1;
  }

  private checkEvent(path: string, event: InventoryEvent): void {
    if (event === null || typeof event !== 'object') throw new InventoryEventError(path, event, 'an event is an object');
    if (!retentionTiers.includes(event.tier)) {
      throw new InventoryEventError(`${path}.tier`, event.tier, "a tier is 'gpu' or 'host'");
    }
    switch (event.type) {
      case 'stored':
        if (!Number.isFinite(event.expiresAt)) {
          throw new InventoryEventError(`${path}.expiresAt`, event.expiresAt, 'expiresAt is ms since the Unix epoch');
        }
        checkBlocks(`${path}.blocks`, event.blocks);
        return;
      case 'removed':
        checkBlocks(`${path}.blocks`, event.blocks);
        return;
      case 'cleared':
        return;
      default:
        throw new InventoryEventError(`${path}.type`, (event as { type: unknown }).type, "a type is 'stored', 'removed' or 'cleared'");
    }
  }

  private tickOf(ms: number): number {
    return Math.max(0, Math.floor((ms - this.epochMs) / tickMs));
  }

  private nextStamp(): number {
    this.stamp = (this.stamp + 1) % maxTick;
    if (this.stamp === 0) {
      this.mark.fill(0);
      this.stamp = 1;
    }
    return this.stamp;
  }

  private addWorker(workerId: string, incarnation: string): number {
    const worker = this.freeWorkers.pop() ?? this.workerIds.length;
    this.workerIndex.set(workerId, worker);
    this.workerIds[worker] = workerId;
    this.incarnations[worker] = incarnation;
    this.lastSeq[worker] = -1;
    if (worker >= this.mark.length) {
      const size = Math.max(worker + 1, this.mark.length * 2);
      this.mark = grown(this.mark, size);
      this.markPos = grown(this.markPos, size);
      this.candidateWorker = grown(this.candidateWorker, size);
      this.candidateDepth = grown(this.candidateDepth, size);
      this.candidateGpu = grown(this.candidateGpu, size);
      this.candidateHost = grown(this.candidateHost, size);
      this.candidateExpiry = grown(this.candidateExpiry, size);
    }
    return worker;
  }

  /** The slot holding a hash, or the empty slot where it would go (as −1 − slot). */
  private slotOf(lo: number, hi: number): number {
    const table = this.table;
    let slot = this.home(lo, hi);
    for (;;) {
      const base = slot * slotWords;
      if (table[base + slotWorker] === 0) return -1 - slot;
      if (table[base + slotLo] === lo && table[base + slotHi] === hi) return slot;
      slot = (slot + 1) & this.mask;
    }
  }

  private store(worker: number, lo: number, hi: number, tier: 0 | 1, expiry: number): void {
    const slot = this.slotOf(lo, hi);
    if (slot < 0) {
      const base = (-1 - slot) * slotWords;
      const table = this.table;
      table[base + slotLo] = lo;
      table[base + slotHi] = hi;
      table[base + slotWorker] = worker + 1;
      table[base + slotGpu] = tier === 0 ? expiry : 0;
      table[base + slotHost] = tier === 1 ? expiry : 0;
      table[base + slotMore] = 0;
      this.liveEntries++;
      if (++this.distinctHashes > this.slots * maxLoad) this.rehash(this.slots * 2);
      return;
    }
    const base = slot * slotWords;
    if (this.table[base + slotWorker] === worker + 1) {
      this.table[base + slotGpu + tier] = expiry;
      return;
    }
    for (let m = this.table[base + slotMore]!; m !== 0; m = this.more[(m - 1) * moreWords + moreNext]!) {
      if (this.more[(m - 1) * moreWords + moreWorker] === worker) {
        this.more[(m - 1) * moreWords + moreGpu + tier] = expiry;
        return;
      }
    }
    const m = this.allocateMore();
    const at = (m - 1) * moreWords;
    this.more[at + moreWorker] = worker;
    this.more[at + moreGpu] = tier === 0 ? expiry : 0;
    this.more[at + moreHost] = tier === 1 ? expiry : 0;
    this.more[at + moreNext] = this.table[base + slotMore]!;
    this.table[base + slotMore] = m;
    this.liveEntries++;
  }

  private remove(worker: number, lo: number, hi: number, tier: 0 | 1): void {
    const slot = this.slotOf(lo, hi);
    if (slot < 0) return;
    const base = slot * slotWords;
    const table = this.table;
    const more = this.more;
    if (table[base + slotWorker] === worker + 1) {
      table[base + slotGpu + tier] = 0;
      if (table[base + slotGpu] === 0 && table[base + slotHost] === 0 && !this.promote(base)) this.deleteSlot(slot);
      return;
    }
    let previous = 0;
    for (let m = table[base + slotMore]!; m !== 0; previous = m, m = more[(m - 1) * moreWords + moreNext]!) {
      const at = (m - 1) * moreWords;
      if (more[at + moreWorker] !== worker) continue;
      more[at + moreGpu + tier] = 0;
      if (more[at + moreGpu] === 0 && more[at + moreHost] === 0) this.unlinkMore(base, previous, m);
      return;
    }
  }

  /** The slot's inline entry is gone: move its first overflow entry inline. False if it has none. */
  private promote(base: number): boolean {
    const table = this.table;
    const m = table[base + slotMore]!;
    this.liveEntries--;
    if (m === 0) return false;
    const at = (m - 1) * moreWords;
    table[base + slotWorker] = this.more[at + moreWorker]! + 1;
    table[base + slotGpu] = this.more[at + moreGpu]!;
    table[base + slotHost] = this.more[at + moreHost]!;
    table[base + slotMore] = this.more[at + moreNext]!;
    this.freeMore(m);
    return true;
  }

  private unlinkMore(base: number, previous: number, m: number): void {
    const next = this.more[(m - 1) * moreWords + moreNext]!;
    if (previous === 0) this.table[base + slotMore] = next;
    else this.more[(previous - 1) * moreWords + moreNext] = next;
    this.freeMore(m);
    this.liveEntries--;
  }

  /** Backward-shift deletion, so that probing never needs tombstones. */
  private deleteSlot(slot: number): void {
    const table = this.table;
    const mask = this.mask;
    let hole = slot;
    for (let i = (slot + 1) & mask; table[i * slotWords + slotWorker] !== 0; i = (i + 1) & mask) {
      const home = this.home(table[i * slotWords + slotLo]!, table[i * slotWords + slotHi]!);
      if (((i - home) & mask) >= ((i - hole) & mask)) {
        table.copyWithin(hole * slotWords, i * slotWords, (i + 1) * slotWords);
        hole = i;
      }
    }
    table[hole * slotWords + slotWorker] = 0;
    this.distinctHashes--;
  }

  /**
   * Clears the given tiers of every entry of `worker` (of every worker if −1), only where expired
   * at `expiredBy` when given; frees entries left on no tier and rebuilds the table if a block
   * lost its last worker. One pass over the table.
   */
  private removeWhere(worker: number, tiers: readonly (0 | 1)[], expiredBy?: number): void {
    const table = this.table;
    const more = this.more;
    const clear = (words: Int32Array, at: number, owner: number) => {
      if (worker !== -1 && owner !== worker) return false;
      for (const tier of tiers) if (expiredBy === undefined || words[at + tier]! <= expiredBy) words[at + tier] = 0;
      return words[at] === 0 && words[at + 1] === 0;
    };
    let emptied = false;
    for (let slot = 0; slot < this.slots; slot++) {
      const base = slot * slotWords;
      if (table[base + slotWorker] === 0) continue;
      let previous = 0;
      for (let m = table[base + slotMore]!; m !== 0; ) {
        const at = (m - 1) * moreWords;
        const next = more[at + moreNext]!;
        if (clear(more, at + moreGpu, more[at + moreWorker]!)) this.unlinkMore(base, previous, m);
        else previous = m;
        m = next;
      }
      if (clear(table, base + slotGpu, table[base + slotWorker]! - 1) && !this.promote(base)) {
        table[base + slotWorker] = 0;
        this.distinctHashes--;
        emptied = true;
      }
    }
    if (emptied) this.rehash(this.slots);
  }

  /** Fibonacci hashing over both halves: cheap, and the top bits it keeps are well mixed. */
  private home(lo: number, hi: number): number {
    return Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) >>> this.homeShift;
  }

  /** Moves every occupied slot into a new table of `slots` slots. */
  private rehash(slots: number): void {
    const old = this.table;
    const oldSlots = this.slots;
    this.resize(slots);
    for (let slot = 0; slot < oldSlots; slot++) {
      const from = slot * slotWords;
      if (old[from + slotWorker] === 0) continue;
      const to = -1 - this.slotOf(old[from + slotLo]!, old[from + slotHi]!);
      this.table.set(old.subarray(from, from + slotWords), to * slotWords);
    }
  }

  private resize(slots: number): void {
    this.mask = slots - 1;
    this.homeShift = 32 - Math.log2(slots);
    this.table = new Int32Array(slots * slotWords);
    this.slots = slots;
  }

  private allocateMore(): number {
    if (this.moreFree !== 0) {
      const m = this.moreFree;
      this.moreFree = this.more[(m - 1) * moreWords + moreNext]!;
      return m;
    }
    if (this.moreUsed * moreWords === this.more.length) {
      this.more = grown(this.more, Math.ceil((this.more.length / moreWords) * growth) * moreWords);
    }
    return ++this.moreUsed;
  }

  private freeMore(m: number): void {
    this.more[(m - 1) * moreWords + moreNext] = this.moreFree;
    this.moreFree = m;
  }
}
