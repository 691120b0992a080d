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

// Entry slab: one entry per (block hash, worker), six uint32 words.
const stride = 6;
const hashLoWord = 0;
const hashHiWord = 1;
const workerWord = 2;
const gpuWord = 3; // expiry tick on the GPU tier, 0 = not retained there
const hostWord = 4; // expiry tick on the host tier
const nextWord = 5; // next entry with the same hash, or `none`
const none = 0xffffffff;
const tierWord: Record<RetentionTier, number> = { gpu: gpuWord, host: hostWord };
const tickMs = 100;
const maxTick = 0xfffffffe;
const maxLoad = 0.75;
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** murmur3's 32-bit finaliser over both halves: the bucket of a hash. */
function mix(lo: number, hi: number): number {
  let h = (lo ^ Math.imul(hi, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A chain's hashes as (lo, hi) uint32 pairs, without copying on little-endian machines. */
function hashWords(chain: BigUint64Array | readonly bigint[]): Uint32Array {
  if (littleEndian && chain instanceof BigUint64Array) {
    return new Uint32Array(chain.buffer, chain.byteOffset, chain.length * 2);
  }
  const words = new Uint32Array(chain.length * 2);
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

/**
 * The advisory retained inventory: which block hashes each worker retains, on which tier, until
 * when. Compact: one 24-byte entry per (block, worker) in a typed-array slab, chained per hash,
 * plus an open-addressing table (4 bytes a slot) from hash to its first entry. Lookups allocate
 * only their answer.
 */
export class RetainedInventory {
  private slab: Uint32Array;
  private used = 0;
  private freeHead = none;
  private liveEntries = 0;
  private heads: Uint32Array;
  private mask: number;
  private distinctHashes = 0;

  private readonly workerIndex = new Map<string, number>();
  private readonly workerIds: (string | undefined)[] = [];
  private readonly incarnations: string[] = [];
  private readonly lastSeq: number[] = [];
  private readonly freeWorkers: number[] = [];

  // Lookup scratch, indexed by worker and by candidate.
  private mark = new Uint32Array(16);
  private markPos = new Uint32Array(16);
  private stamp = 0;
  private candidateWorker = new Uint32Array(16);
  private candidateDepth = new Uint32Array(16);
  private candidateGpu = new Uint32Array(16);
  private candidateHost = new Uint32Array(16);
  private candidateExpiry = new Uint32Array(16);

  private readonly now: () => number;
  private readonly epochMs: number;

  constructor(options: RetainedInventoryOptions = {}) {
    this.now = options.now ?? Date.now;
    this.epochMs = this.now();
    const expected = Math.max(16, Math.ceil(options.expectedBlocks ?? 1024));
    this.slab = new Uint32Array(expected * stride);
    const slots = 2 ** Math.ceil(Math.log2(expected / maxLoad));
    this.heads = new Uint32Array(slots);
    this.mask = slots - 1;
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
    return this.slab.byteLength + this.heads.byteLength;
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
      this.removeWhere((w) => w === worker, [gpuWord, hostWord]);
      this.incarnations[worker] = incarnation;
      this.lastSeq[worker] = -1;
    }
    if (seq <= this.lastSeq[worker]!) return false;
    this.lastSeq[worker] = seq;
    const nowTick = this.tickOf(this.now());
    for (const event of events) {
      const word = tierWord[event.tier];
      if (event.type === 'cleared') {
        this.removeWhere((w) => w === worker, [word]);
        continue;
      }
      const words = hashWords(event.blocks);
      const expiry = event.type === 'stored' ? Math.min(maxTick, Math.ceil((event.expiresAt - this.epochMs) / tickMs)) : 0;
      for (let i = 0; i < words.length; i += 2) {
        if (expiry > nowTick) this.store(worker, words[i]!, words[i + 1]!, word, expiry);
        else this.remove(worker, words[i]!, words[i + 1]!, word);
      }
    }
    return true;
  }

  /** Forgets a worker (its inventory lease ended, or it left). */
  removeWorker(workerId: string): boolean {
    const worker = this.workerIndex.get(workerId);
    if (worker === undefined) return false;
    this.removeWhere((w) => w === worker, [gpuWord, hostWord]);
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
    const nowTick = this.tickOf(this.now());
    this.removeWhere(() => true, [gpuWord, hostWord], nowTick);
    return before - this.liveEntries;
  }

  /**
   * For each worker that retains at least the chain's first block: how many leading blocks of the
   * chain it retains, on which tier, most blocks first. Advisory only: see `AdvisoryRetainedPrefix`.
   */
  longestRetainedPrefix(chain: BigUint64Array | readonly bigint[]): AdvisoryRetainedPrefix[] {
    const words = hashWords(checkBlocks('chain', chain));
    if (words.length === 0) return [];
    const nowTick = this.tickOf(this.now());
    const slab = this.slab;
    let head = this.headOf(words[0]!, words[1]!);
    if (head === none) return [];
    const stamp = this.nextStamp();
    let candidates = 0;
    for (let e = head; e !== none; e = slab[e * stride + nextWord]!) {
      const base = e * stride;
      const gpu = slab[base + gpuWord]! > nowTick;
      const host = slab[base + hostWord]! > nowTick;
      if (!gpu && !host) continue;
      const worker = slab[base + workerWord]!;
      this.mark[worker] = stamp;
      this.markPos[worker] = candidates;
      this.candidateWorker[candidates] = worker;
      this.candidateDepth[candidates] = 1;
      this.candidateGpu[candidates] = gpu ? 1 : 0;
      this.candidateHost[candidates] = host ? 1 : 0;
      this.candidateExpiry[candidates] = Math.min(
        gpu ? slab[base + gpuWord]! : maxTick,
        host ? slab[base + hostWord]! : maxTick,
      );
      candidates++;
    }
    for (let depth = 1; depth < words.length / 2; depth++) {
      head = this.headOf(words[2 * depth]!, words[2 * depth + 1]!);
      if (head === none) break;
      let advanced = 0;
      for (let e = head; e !== none; e = slab[e * stride + nextWord]!) {
        const base = e * stride;
        const worker = slab[base + workerWord]!;
        if (this.mark[worker] !== stamp) continue;
        const c = this.markPos[worker]!;
        if (this.candidateDepth[c] !== depth) continue;
        const gpuExpiry = slab[base + gpuWord]!;
        const hostExpiry = slab[base + hostWord]!;
        const gpu = gpuExpiry > nowTick;
        const host = hostExpiry > nowTick;
        if (!gpu && !host) continue;
        this.candidateDepth[c] = depth + 1;
        this.candidateGpu[c]! += gpu ? 1 : 0;
        this.candidateHost[c]! += host ? 1 : 0;
        this.candidateExpiry[c] = Math.min(this.candidateExpiry[c]!, gpu ? gpuExpiry : maxTick, host ? hostExpiry : maxTick);
        advanced++;
      }
      if (advanced === 0) break;
    }
    const answer: AdvisoryRetainedPrefix[] = [];
    for (let c = 0; c < candidates; c++) {
      const worker = this.candidateWorker[c]!;
      answer.push({
        workerId: this.workerIds[worker]!,
        incarnation: this.incarnations[worker]!,
        blocks: this.candidateDepth[c]!,
        gpuBlocks: this.candidateGpu[c]!,
        hostBlocks: this.candidateHost[c]!,
        expiresAt: this.epochMs + this.candidateExpiry[c]! * tickMs,
      });
    }
    return answer.sort((a, b) => b.blocks - a.blocks || (a.workerId < b.workerId ? -1 : 1));
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
    this.stamp = (this.stamp + 1) >>> 0;
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
      const grow = (old: Uint32Array) => {
        const next = new Uint32Array(size);
        next.set(old);
        return next;
      };
      this.mark = grow(this.mark);
      this.markPos = grow(this.markPos);
      this.candidateWorker = grow(this.candidateWorker);
      this.candidateDepth = grow(this.candidateDepth);
      this.candidateGpu = grow(this.candidateGpu);
      this.candidateHost = grow(this.candidateHost);
      this.candidateExpiry = grow(this.candidateExpiry);
    }
    return worker;
  }

  /** The table slot of a hash, or the empty slot where it would go (as −1 − slot). */
  private slotOf(lo: number, hi: number): number {
    const slab = this.slab;
    let slot = mix(lo, hi) & this.mask;
    for (;;) {
      const head = this.heads[slot]!;
      if (head === 0) return -1 - slot;
      const base = (head - 1) * stride;
      if (slab[base + hashLoWord] === lo && slab[base + hashHiWord] === hi) return slot;
      slot = (slot + 1) & this.mask;
    }
  }

  private headOf(lo: number, hi: number): number {
    const slot = this.slotOf(lo, hi);
    return slot < 0 ? none : this.heads[slot]! - 1;
  }

  private store(worker: number, lo: number, hi: number, word: number, expiry: number): void {
    const slot = this.slotOf(lo, hi);
    if (slot >= 0) {
      for (let e = this.heads[slot]! - 1; e !== none; e = this.slab[e * stride + nextWord]!) {
        if (this.slab[e * stride + workerWord] === worker) {
          this.slab[e * stride + word] = expiry;
          return;
        }
      }
    }
    const entry = this.allocate();
    const base = entry * stride;
    const slab = this.slab;
    slab[base + hashLoWord] = lo;
    slab[base + hashHiWord] = hi;
    slab[base + workerWord] = worker;
    slab[base + gpuWord] = 0;
    slab[base + hostWord] = 0;
    slab[base + word] = expiry;
    this.liveEntries++;
    if (slot >= 0) {
      slab[base + nextWord] = this.heads[slot]! - 1;
      this.heads[slot] = entry + 1;
      return;
    }
    slab[base + nextWord] = none;
    this.heads[-1 - slot] = entry + 1;
    if (++this.distinctHashes > this.heads.length * maxLoad) this.rehash(this.heads.length * 2);
  }

  private remove(worker: number, lo: number, hi: number, word: number): void {
    const slot = this.slotOf(lo, hi);
    if (slot < 0) return;
    const slab = this.slab;
    let previous = none;
    for (let e = this.heads[slot]! - 1; e !== none; previous = e, e = slab[e * stride + nextWord]!) {
      const base = e * stride;
      if (slab[base + workerWord] !== worker) continue;
      slab[base + word] = 0;
      if (slab[base + gpuWord] !== 0 || slab[base + hostWord] !== 0) return;
      this.unlink(slot, previous, e);
      if (this.heads[slot] === 0) this.deleteSlot(slot);
      return;
    }
  }

  private unlink(slot: number, previous: number, entry: number): void {
    const next = this.slab[entry * stride + nextWord]!;
    if (previous === none) this.heads[slot] = next === none ? 0 : next + 1;
    else this.slab[previous * stride + nextWord] = next;
    this.slab[entry * stride + workerWord] = none;
    this.slab[entry * stride + nextWord] = this.freeHead;
    this.freeHead = entry;
    this.liveEntries--;
  }

  /** Backward-shift deletion, so that probing never needs tombstones. */
  private deleteSlot(slot: number): void {
    const heads = this.heads;
    const mask = this.mask;
    let hole = slot;
    for (let i = (slot + 1) & mask; heads[i] !== 0; i = (i + 1) & mask) {
      const base = (heads[i]! - 1) * stride;
      const home = mix(this.slab[base + hashLoWord]!, this.slab[base + hashHiWord]!) & mask;
      if (((i - home) & mask) >= ((i - hole) & mask)) {
        heads[hole] = heads[i]!;
        hole = i;
      }
    }
    heads[hole] = 0;
    this.distinctHashes--;
  }

  /**
   * Clears the given tier words of every entry whose worker matches (only those expired at
   * `expiredBy`, when given), frees entries left on no tier, and rebuilds the table if a hash lost
   * its last entry. One pass over the whole index.
   */
  private removeWhere(matches: (worker: number) => boolean, words: readonly number[], expiredBy?: number): void {
    const slab = this.slab;
    let emptied = false;
    for (let slot = 0; slot < this.heads.length; slot++) {
      if (this.heads[slot] === 0) continue;
      let previous = none;
      for (let e = this.heads[slot]! - 1; e !== none; ) {
        const base = e * stride;
        const next = slab[base + nextWord]!;
        if (matches(slab[base + workerWord]!)) {
          for (const word of words) if (expiredBy === undefined || slab[base + word]! <= expiredBy) slab[base + word] = 0;
        }
        if (slab[base + gpuWord] === 0 && slab[base + hostWord] === 0) this.unlink(slot, previous, e);
        else previous = e;
        e = next;
      }
      if (this.heads[slot] === 0) {
        this.distinctHashes--;
        emptied = true;
      }
    }
    if (emptied) this.rehash(this.heads.length);
  }

  private rehash(slots: number): void {
    const old = this.heads;
    this.heads = new Uint32Array(slots);
    this.mask = slots - 1;
    for (const head of old) {
      if (head === 0) continue;
      const base = (head - 1) * stride;
      let slot = mix(this.slab[base + hashLoWord]!, this.slab[base + hashHiWord]!) & this.mask;
      while (this.heads[slot] !== 0) slot = (slot + 1) & this.mask;
      this.heads[slot] = head;
    }
  }

  private allocate(): number {
    if (this.freeHead !== none) {
      const entry = this.freeHead;
      this.freeHead = this.slab[entry * stride + nextWord]!;
      return entry;
    }
    if (this.used * stride === this.slab.length) {
      const grown = new Uint32Array(Math.ceil((this.slab.length / stride) * 1.5) * stride);
      grown.set(this.slab);
      this.slab = grown;
    }
    return this.used++;
  }
}
