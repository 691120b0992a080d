import { InvalidInventoryOptionError, InventoryEventError } from './errors.js';
import { checkFunction, checkOptionsObject } from './options.js';
import { checkExpiresAt, type InventoryBatch, type InventoryEvent, type RetentionTier, retentionTiers } from './events.js';
import { PreparedArray } from './prepared-array.js';
import { type ResizableWords, resizableWords, resizedWords } from './resizable-words.js';
import { sharedWords } from './shared-words.js';

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
  /**
   * How many leading blocks of the chain it retains in host memory, without a gap: the prefix a reader
   * that may not touch GPU memory can take (`hostBlocks` counts host blocks anywhere in the prefix).
   */
  readonly leadingHostBlocks: number;
  /** The earliest expiry among those blocks (ms since the Unix epoch, to the inventory's 100 ms tick). */
  readonly expiresAt: number;
}

export interface RetainedInventoryOptions {
  /** Wall clock in ms since the Unix epoch (default `Date.now`); expiries are compared with it. */
  readonly now?: () => number;
  /** Blocks to make room for up front (default 1,024); the index grows as needed anyway. */
  readonly expectedBlocks?: number;
  /**
   * While the table grows, how many slots of the previous table move to the new one per `apply`, per
   * lookup and per newly stored block (default 8, at least 3 so that a move always ends before the
   * next growth). Smaller spreads the move over more operations.
   */
  readonly rehashStep?: number;
  /**
   * How many records each `apply` (plus one per block in its batch) and each lookup checks for
   * expiry, in turn over all workers, freeing what expired (default 32): nobody needs to call `prune`.
   */
  readonly pruneStep?: number;
}

// Layout. Each worker keeps its retained blocks as records in its own slab, in the order it
// announced them, so a chain a worker stored in one go lies contiguous in memory: a lookup finds a
// chain's first block through the table, then walks the worker's records while they continue the
// chain, and goes back to the table only where they stop.
//
// Worker records, four int32 words: hash lo, hash hi, GPU expiry tick, host expiry tick (0 = not
// on that tier; a record on no tier is dead and waits for compaction).
const recordWords = 4;
const recordLo = 0;
const recordHi = 1;
const recordGpu = 2;
// Table: open addressing (linear probing) keyed by the 64-bit hash; a slot holds the hash and the
// first worker that retains the block, further workers of the same block are overflow entries.
const slotWords = 6;
const slotLo = 0;
const slotHi = 1;
const slotWorker = 2; // worker index + 1; 0 = empty slot; −1 = moved (in the previous table only)
const slotRecord = 3; // the record of this block in that worker's slab
const slotMore = 4; // first overflow entry + 1; 0 = none
const slotHolders = 5; // OR of holderBit(worker) over the block's workers: most "not here" answers need no list walk
const moreWords = 3;
const moreWorker = 0;
const moreRecord = 1;
const moreNext = 2; // next overflow entry + 1; 0 = none
const movedSlot = -1;
const inlineEntry = 0;
const noEntry = -1;
const tierOffset: Record<RetentionTier, 0 | 1> = { gpu: 0, host: 1 };
const tickMs = 100;
const maxTick = 0x7fffffff; // ticks stay int32: 2^31 × 100 ms is 6.8 years
const maxLoad = 0.85;
const growth = 1.5; // of the table and the overflow slab
// A grown table starts at load maxLoad / growth and grows again at maxLoad: at least
// (maxLoad − maxLoad / growth) × growth = 0.425 × (previous slots) new blocks later. Moving 3 slots
// per new block empties the previous table by then.
const minRehashStep = 3;
// The next table (and the next overflow slab) is allocated at load `prepareLoad` and one of its pages
// touched per `touchEvery` new blocks (overflow entries), so that the kernel's page faults are spread
// out instead of hitting the first operations of a growth step at up to one per stored block. The
// next table has growth × slotWords × 4 / 4096 = 0.0088 pages per current slot, and
// (maxLoad − prepareLoad) / touchEvery = 0.0125 touches per slot come first, so it is all touched
// before it is needed (the overflow slab: 0.0015 pages and 0.05 touches per entry).
const prepareLoad = 0.8;
const touchEvery = 4;
const recordGrowth = 1.25; // of a worker's record slab
// Arrays grow in place within their reservation (address space only); past it they are copied
// once into one `reservation` times larger.
const reservation = 8;
// The overflow entries reserve address space for this many up front (192 MiB, none of it committed
// until used) and grow in place by `moreStepEntries` at a time: the kernel faults in a grown
// buffer's new pages when it grows (tens of µs a page here), so small steps keep that to 16 pages.
const moreReservedEntries = 1 << 24;
const moreStepEntries = 5_461; // × 12 bytes = 64 KiB
/** Up to this many workers on a chain's first block, a lookup follows each one on its own. */
const followEachLimit = 32;
const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const noTable = new Int32Array(0);
const noRecords = new Int32Array(0);

const holderBit = (worker: number): number => 1 << (worker & 31);

/** murmur3's 32-bit finaliser over both halves of a hash. */
function mix(lo: number, hi: number): number {
  let h = lo ^ Math.imul(hi, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * A chain's hashes as (lo, hi) pairs of 32-bit words, without copying on little-endian machines.
 * Words are int32 everywhere in the index so that V8 never boxes a value above 2^31.
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
  next.set(array.subarray(0, Math.min(array.length, length)));
  return next;
}

/** A worker's records in a slab of `words` words: its used records, the rest unwritten. */
function slabOf(records: Int32Array, used: number, words: number): Int32Array {
  if (words === 0) return noRecords;
  const slab = sharedWords(words);
  slab.set(records.subarray(0, used * recordWords));
  return slab;
}

/**
 * The advisory retained inventory: which block hashes each worker retains, on which tier, until
 * when. Compact, in typed arrays: a 16-byte record per (block, worker) in the worker's own slab,
 * a 24-byte table slot per distinct block (load 0.57–0.85) and a 12-byte overflow entry for each
 * further worker of the same block: at most about 42 + 20 bytes per retained block while blocks
 * are distinct, plus 12 per shared one. Lookups allocate only their answer. A `cleared` event, a new
 * incarnation and `removeWorker` cost one pass over that worker's records; `prune` one pass over
 * all records, though expired entries are also freed a few per operation without it. The table
 * grows without a pause: the previous table's blocks move over a few per operation.
 */
export class RetainedInventory {
  private table: Int32Array;
  private slots = 0;
  // home(h) = ((mix(h) >>> homeShift) × homeScale) | 0: a multiply instead of a modulo, exact in
  // a double because (mix(h) >>> homeShift) × slots stays below 2^53.
  private homeShift = 0;
  private homeScale = 0;
  private distinctHashes = 0; // in both tables
  // While the table grows, the previous table: its blocks move to `table` a few slots per operation,
  // from its end down (slots from `unmoved` on have moved), and whenever an operation touches them.
  // A moved slot is marked `movedSlot`, so that probing goes on past it; nothing else changes in the
  // previous table.
  private previous: Int32Array = noTable;
  private previousSlots = 0;
  private previousHomeShift = 0;
  private previousHomeScale = 0;
  private unmoved = 0;
  private readonly rehashStep: number;
  private readonly nextTable = new PreparedArray();
  // The expiry sweep's next record.
  private sweepWorker = 0;
  private sweepRecord = 0;
  private readonly pruneStep: number;
  private more: ResizableWords = resizableWords(64 * moreWords, moreReservedEntries * moreWords);
  private moreUsed = 0;
  private moreFree = 0; // free overflow entry + 1
  private liveEntries = 0;

  private readonly workerIndex = new Map<string, number>();
  private readonly workerIds: (string | undefined)[] = [];
  private readonly incarnations: string[] = [];
  private readonly epochs: number[] = [];
  private readonly lastSeq: number[] = [];
  /** Whether the worker's incarnation has said its inventory is complete (`InventoryBatch.complete`). */
  private readonly complete: boolean[] = [];
  private readonly freeWorkers: number[] = [];
  private readonly records: Int32Array[] = [];
  private readonly recordsUsed: number[] = [];
  private readonly recordsDead: number[] = [];

  // Lookup scratch, indexed by worker (mark, markPos) or by candidate (the rest).
  private mark = new Int32Array(16);
  private markPos = new Int32Array(16);
  private stamp = 0;
  private candidateWorker = new Int32Array(16);
  private candidateDepth = new Int32Array(16);
  private candidateGpu = new Int32Array(16);
  private candidateHost = new Int32Array(16);
  private candidateLeadingHost = new Int32Array(16);
  private candidateExpiry = new Int32Array(16);
  private bases = new Int32Array(64);
  private touched = 0; // written so that the touching loads are not optimised away

  private readonly now: () => number;
  private readonly epochMs: number;

  constructor(options: RetainedInventoryOptions = {}) {
    checkOptionsObject('options', options);
    const { now = Date.now, expectedBlocks = 1024, rehashStep = 8, pruneStep = 32 } = options;
    checkFunction('options.now', now);
    const wholeAtLeast = (option: string, value: number, min: number): number => {
      if (!Number.isSafeInteger(value) || value < min) throw new InvalidInventoryOptionError(`options.${option}`, value, `must be a whole number ≥ ${min}`);
      return value;
    };
    this.now = now;
    this.epochMs = this.now();
    if (!Number.isFinite(this.epochMs)) throw new InvalidInventoryOptionError('options.now', this.epochMs, 'must return milliseconds since the Unix epoch');
    this.rehashStep = wholeAtLeast('rehashStep', rehashStep, minRehashStep);
    this.pruneStep = wholeAtLeast('pruneStep', pruneStep, 0);
    this.table = noTable;
    this.resize(Math.ceil(Math.max(16, wholeAtLeast('expectedBlocks', expectedBlocks, 0)) / maxLoad));
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
    return this.records.reduce(
      (bytes, records) => bytes + records.byteLength,
      this.table.byteLength + this.previous.byteLength + this.nextTable.byteLength + this.more.byteLength,
    );
  }

  /**
   * Applies one worker's batch. A batch of a larger epoch (a newer incarnation) first drops
   * everything the worker's previous incarnation retained; a batch of a smaller epoch (a superseded
   * incarnation's) is ignored, as is a batch whose `seq` is not above the last applied one of the
   * same incarnation (both return false).
   */
  apply(batch: InventoryBatch): boolean {
    if (batch === null || typeof batch !== 'object') throw new InventoryEventError('', batch, 'a batch is an object');
    const { workerId, incarnation, epoch, seq } = batch;
    const events: readonly InventoryEvent[] = batch.events;
    if (typeof workerId !== 'string' || workerId.length === 0) {
      throw new InventoryEventError('workerId', workerId, 'a worker id is a non-empty string');
    }
    if (typeof incarnation !== 'string' || incarnation.length === 0) {
      throw new InventoryEventError('incarnation', incarnation, 'an incarnation is a non-empty string');
    }
    if (!Number.isSafeInteger(epoch) || epoch < 1) throw new InventoryEventError('epoch', epoch, 'an epoch is a whole number ≥ 1');
    if (!Number.isSafeInteger(seq) || seq < 0) throw new InventoryEventError('seq', seq, 'seq is a whole number ≥ 0');
    if (!Array.isArray(events as unknown)) throw new InventoryEventError('events', events, 'events are an array');
    if (batch.complete !== undefined && typeof batch.complete !== 'boolean') {
      throw new InventoryEventError('complete', batch.complete, 'complete is a boolean when given');
    }
    events.forEach((event: InventoryEvent, i) => this.checkEvent(`events.${i}`, event));

    let worker = this.workerIndex.get(workerId);
    if (worker !== undefined && epoch === this.epochs[worker] && incarnation !== this.incarnations[worker]) {
      throw new InventoryEventError('incarnation', incarnation, `epoch ${epoch} belongs to incarnation ${this.incarnations[worker]}`);
    }
    if (worker !== undefined && epoch < this.epochs[worker]!) return false;
    if (worker === undefined) {
      worker = this.addWorker(workerId, incarnation, epoch);
    } else if (epoch > this.epochs[worker]!) {
      this.dropRecords(worker);
      this.incarnations[worker] = incarnation;
      this.epochs[worker] = epoch;
      this.lastSeq[worker] = -1;
      this.complete[worker] = false;
    }
    if (seq <= this.lastSeq[worker]!) return false;
    this.lastSeq[worker] = seq;
    if (batch.complete === true) this.complete[worker] = true;
    const nowTick = this.tickOf(this.now());
    let blocks = 0;
    for (const event of events) {
      const tier = tierOffset[event.tier];
      if (event.type === 'cleared') {
        this.withdraw(worker, tier, maxTick);
        continue;
      }
      const words = hashWords(event.blocks);
      blocks += words.length / 2;
      const expiry = event.type === 'stored' ? Math.min(maxTick, Math.ceil((event.expiresAt - this.epochMs) / tickMs)) : 0;
      if (expiry > nowTick) this.reserveRecords(worker, words.length / 2);
      for (let i = 0; i < words.length; i += 2) {
        if (expiry > nowTick) this.store(worker, words[i]!, words[i + 1]!, tier, expiry);
        else this.remove(worker, words[i]!, words[i + 1]!, tier);
      }
    }
    this.compactIfSparse(worker);
    this.maintain(this.pruneStep + blocks, nowTick);
    return true;
  }

  /** Forgets a worker (its inventory lease ended, or it left). */
  removeWorker(workerId: string): boolean {
    const worker = this.workerIndex.get(workerId);
    if (worker === undefined) return false;
    this.dropRecords(worker);
    this.workerIndex.delete(workerId);
    this.workerIds[worker] = undefined;
    this.freeWorkers.push(worker);
    return true;
  }

  workers(): string[] {
    return [...this.workerIndex.keys()];
  }

  /**
   * The epoch of the worker's incarnation once one of its applied batches said its inventory is
   * complete (`InventoryBatch.complete`); undefined before that, for an unknown worker, and again for a
   * newer incarnation until it says so in turn.
   */
  completeEpoch(workerId: string): number | undefined {
    const worker = this.workerIndex.get(workerId);
    return worker !== undefined && this.complete[worker] === true ? this.epochs[worker] : undefined;
  }

  /**
   * Drops every expired entry at once and compacts; returns how many (block, worker) entries were
   * freed. Not needed for correctness or memory: operations free expired entries a few at a time.
   */
  prune(): number {
    const before = this.liveEntries;
    const nowTick = this.tickOf(this.now());
    for (const worker of this.workerIndex.values()) {
      for (let record = 0, used = this.recordsUsed[worker]!; record < used; record++) this.expire(worker, record, nowTick, nowTick);
      this.compactIfSparse(worker);
    }
    return before - this.liveEntries;
  }

  /**
   * For each worker that retains at least the chain's first block: how many leading blocks of the
   * chain it retains, on which tier, most blocks first. Advisory only: see `AdvisoryRetainedPrefix`.
   */
  longestRetainedPrefix(chain: BigUint64Array | readonly bigint[]): AdvisoryRetainedPrefix[] {
    const words = hashWords(checkBlocks('chain', chain));
    const nowTick = this.tickOf(this.now());
    // Before the walk: sweeping may delete slots, which shifts others.
    this.maintain(this.pruneStep, nowTick);
    const blocks = words.length / 2;
    if (blocks === 0) return [];
    const first = this.slotOf(words[0]!, words[1]!);
    if (first < 0) return [];
    const table = this.table;
    const more = this.more;
    const base = first * slotWords;
    const answer: AdvisoryRetainedPrefix[] = [];
    // Count the holders and touch each one's first record: those loads do not depend on each other,
    // so their cache misses overlap before the walks begin (JavaScript has no prefetch instruction).
    let holders = 1;
    let touched = this.records[table[base + slotWorker]! - 1]![table[base + slotRecord]! * recordWords]!;
    for (let m = table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
      holders++;
      touched ^= this.records[more[(m - 1) * moreWords + moreWorker]!]![more[(m - 1) * moreWords + moreRecord]! * recordWords]!;
    }
    this.touched = touched;
    if (holders > followEachLimit) {
      this.followTogether(words, blocks, nowTick, answer);
    } else {
      this.followOne(table[base + slotWorker]! - 1, table[base + slotRecord]!, words, blocks, nowTick, answer);
      for (let m = table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
        const at = (m - 1) * moreWords;
        this.followOne(more[at + moreWorker]!, more[at + moreRecord]!, words, blocks, nowTick, answer);
      }
    }
    return answer.sort((a, b) => b.blocks - a.blocks || (a.workerId < b.workerId ? -1 : 1));
  }

  /**
   * Follows one worker from its record of the chain's first block: along its own records while
   * they continue the chain, through the table where they do not. Adds its prefix, if any.
   */
  private followOne(worker: number, start: number, words: Int32Array, blocks: number, nowTick: number, answer: AdvisoryRetainedPrefix[]): void {
    const records = this.records[worker]!;
    const end = this.recordsUsed[worker]! * recordWords;
    let at = start * recordWords;
    let depth = 0;
    let gpuBlocks = 0;
    let hostBlocks = 0;
    let leadingHost = 0;
    let expiry = maxTick;
    for (;;) {
      const gpuExpiry = records[at + recordGpu]!;
      const hostExpiry = records[at + recordGpu + 1]!;
      const gpu = gpuExpiry > nowTick;
      const host = hostExpiry > nowTick;
      if (!gpu && !host) break;
      if (gpu) {
        gpuBlocks++;
        if (gpuExpiry < expiry) expiry = gpuExpiry;
      }
      if (host) {
        hostBlocks++;
        if (leadingHost === depth) leadingHost++;
        if (hostExpiry < expiry) expiry = hostExpiry;
      }
      if (++depth === blocks) break;
      const lo = words[2 * depth]!;
      const hi = words[2 * depth + 1]!;
      at += recordWords;
      // The worker's next record continues the chain (a dead one never does: the block may have
      // been stored again elsewhere); otherwise ask the table.
      if (at < end && records[at + recordLo] === lo && records[at + recordHi] === hi && (records[at + recordGpu]! | records[at + recordGpu + 1]!) !== 0) {
        continue;
      }
      const record = this.recordOf(worker, lo, hi);
      if (record < 0) break;
      at = record * recordWords;
    }
    if (depth > 0) answer.push(this.prefix(worker, depth, gpuBlocks, hostBlocks, leadingHost, expiry));
  }

  /**
   * Many workers retain the first block: resolve every block's slot once, walk each block's
   * entries once and advance every worker whose prefix reached it (marked per lookup), instead of
   * searching each worker's entry in long lists.
   */
  private followTogether(words: Int32Array, blocks: number, nowTick: number, answer: AdvisoryRetainedPrefix[]): void {
    if (this.bases.length < blocks) this.bases = new Int32Array(blocks);
    const bases = this.bases;
    let found = 0;
    while (found < blocks) {
      const slot = this.slotOf(words[2 * found]!, words[2 * found + 1]!);
      if (slot < 0) break;
      bases[found++] = slot * slotWords;
    }
    const table = this.table;
    const more = this.more;
    const stamp = this.nextStamp();
    let candidates = 0;
    for (let depth = 0; depth < found; depth++) {
      const base = bases[depth]!;
      let advanced = this.visit(table[base + slotWorker]! - 1, table[base + slotRecord]!, depth, candidates, stamp, nowTick);
      if (depth === 0) candidates += advanced;
      for (let m = table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
        const at = (m - 1) * moreWords;
        const step = this.visit(more[at + moreWorker]!, more[at + moreRecord]!, depth, candidates, stamp, nowTick);
        if (depth === 0) candidates += step;
        advanced += step;
      }
      if (advanced === 0) break;
    }
    for (let c = 0; c < candidates; c++) {
      answer.push(
        this.prefix(this.candidateWorker[c]!, this.candidateDepth[c]!, this.candidateGpu[c]!, this.candidateHost[c]!, this.candidateLeadingHost[c]!, this.candidateExpiry[c]!),
      );
    }
  }

  /**
   * One (worker, block) entry met at `depth` by `followTogether`: at depth 0 it makes the worker
   * a candidate, later it extends the worker's prefix if the prefix reached `depth`. Returns 1 if
   * the worker's prefix grew.
   */
  private visit(worker: number, record: number, depth: number, candidates: number, stamp: number, nowTick: number): number {
    const records = this.records[worker]!;
    const gpuExpiry = records[record * recordWords + recordGpu]!;
    const hostExpiry = records[record * recordWords + recordGpu + 1]!;
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
      this.candidateLeadingHost[c] = 0;
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
      if (this.candidateLeadingHost[c] === depth) this.candidateLeadingHost[c]!++;
      if (hostExpiry < this.candidateExpiry[c]!) this.candidateExpiry[c] = hostExpiry;
    }
    return 1;
  }

  private prefix(worker: number, blocks: number, gpuBlocks: number, hostBlocks: number, leadingHostBlocks: number, expiryTick: number): AdvisoryRetainedPrefix {
    return {
      workerId: this.workerIds[worker]!,
      incarnation: this.incarnations[worker]!,
      blocks,
      gpuBlocks,
      hostBlocks,
      leadingHostBlocks,
      expiresAt: this.epochMs + expiryTick * tickMs,
    };
  }

  private checkEvent(path: string, event: InventoryEvent): void {
    if (event === null || typeof event !== 'object') throw new InventoryEventError(path, event, 'an event is an object');
    if (!retentionTiers.includes(event.tier)) {
      throw new InventoryEventError(`${path}.tier`, event.tier, "a tier is 'gpu' or 'host'");
    }
    switch (event.type) {
      case 'stored':
        checkExpiresAt(`${path}.expiresAt`, event.expiresAt);
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

  private addWorker(workerId: string, incarnation: string, epoch: number): number {
    const worker = this.freeWorkers.pop() ?? this.workerIds.length;
    this.workerIndex.set(workerId, worker);
    this.workerIds[worker] = workerId;
    this.incarnations[worker] = incarnation;
    this.epochs[worker] = epoch;
    this.lastSeq[worker] = -1;
    this.complete[worker] = false;
    this.records[worker] = noRecords;
    this.recordsUsed[worker] = 0;
    this.recordsDead[worker] = 0;
    if (worker >= this.mark.length) {
      const size = Math.max(worker + 1, this.mark.length * 2);
      this.mark = grown(this.mark, size);
      this.markPos = grown(this.markPos, size);
      this.candidateWorker = grown(this.candidateWorker, size);
      this.candidateDepth = grown(this.candidateDepth, size);
      this.candidateGpu = grown(this.candidateGpu, size);
      this.candidateHost = grown(this.candidateHost, size);
      this.candidateLeadingHost = grown(this.candidateLeadingHost, size);
      this.candidateExpiry = grown(this.candidateExpiry, size);
    }
    return worker;
  }

  private home(lo: number, hi: number): number {
    return ((mix(lo, hi) >>> this.homeShift) * this.homeScale) | 0;
  }

  /**
   * The slot holding a hash, or the empty slot where it would go (as −1 − slot). A hash still in
   * the previous table moves to that empty slot first, so callers see one table.
   */
  private slotOf(lo: number, hi: number): number {
    const slot = this.probe(lo, hi);
    if (slot >= 0 || this.previousSlots === 0) return slot;
    const from = this.previousSlotOf(lo, hi);
    if (from < 0) return slot;
    this.move(from, -1 - slot);
    return -1 - slot;
  }

  /** `slotOf` in the current table alone. */
  private probe(lo: number, hi: number): number {
    const table = this.table;
    let slot = this.home(lo, hi);
    for (;;) {
      const base = slot * slotWords;
      if (table[base + slotWorker] === 0) return -1 - slot;
      if (table[base + slotLo] === lo && table[base + slotHi] === hi) return slot;
      if (++slot === this.slots) slot = 0;
    }
  }

  /** The previous table's slot holding a hash, or −1. */
  private previousSlotOf(lo: number, hi: number): number {
    const previous = this.previous;
    // Slots from `unmoved` on have all moved: a probe passes over them to slot 0.
    const unmoved = this.unmoved;
    let slot = ((mix(lo, hi) >>> this.previousHomeShift) * this.previousHomeScale) | 0;
    let wrapped = false;
    for (;;) {
      if (slot >= unmoved) {
        if (wrapped) return -1;
        wrapped = true;
        slot = 0;
        continue;
      }
      const base = slot * slotWords;
      const worker = previous[base + slotWorker]!;
      if (worker === 0) return -1;
      if (worker !== movedSlot && previous[base + slotLo] === lo && previous[base + slotHi] === hi) return slot;
      slot++;
    }
  }

  /** Moves a slot of the previous table to an empty slot of the current one. */
  private move(from: number, to: number): void {
    const previous = this.previous;
    const table = this.table;
    const source = from * slotWords;
    const target = to * slotWords;
    // Word by word: `subarray` would allocate a view per moved slot, 2 GB of them while the table
    // grows to 10 M blocks, and the collections that frees them pause whichever apply they meet.
    for (let word = 0; word < slotWords; word++) table[target + word] = previous[source + word]!;
    previous[source + slotWorker] = movedSlot;
  }

  /**
   * Moves the next `count` slots of the previous table, from its end down; drops it once every
   * slot has moved. It is not cut back as it empties: the first shrink of a resizable buffer of
   * hundreds of MB took 10–20 ms inside one apply, while dropping it whole costs no apply anything
   * (the collector frees it).
   */
  private migrate(count: number): void {
    if (this.previousSlots === 0) return;
    const previous = this.previous;
    const end = Math.max(0, this.unmoved - count);
    for (let slot = this.unmoved - 1; slot >= end; slot--) {
      const base = slot * slotWords;
      if (previous[base + slotWorker]! > 0) this.move(slot, -1 - this.probe(previous[base + slotLo]!, previous[base + slotHi]!));
    }
    this.unmoved = end;
    if (end === 0) {
      this.previous = noTable;
      this.previousSlots = 0;
    }
  }

  /** Starts growing the table: the current one becomes the previous one, emptied a few slots at a time. */
  private grow(): void {
    // At a step of at least `minRehashStep` the previous move has ended; this is the guarantee.
    this.migrate(this.previousSlots);
    this.previous = this.table;
    this.previousSlots = this.slots;
    this.previousHomeShift = this.homeShift;
    this.previousHomeScale = this.homeScale;
    this.unmoved = this.slots;
    this.resize(Math.ceil(this.slots * growth));
  }

  /** Bounded background work of one operation: a step of the table's growth, a step of the expiry sweep. */
  private maintain(sweepRecords: number, nowTick: number): void {
    this.migrate(this.rehashStep);
    this.sweep(sweepRecords, nowTick);
  }

  /** Checks the next `count` records, in turn over every worker, and frees what expired. */
  private sweep(count: number, nowTick: number): void {
    const workers = this.workerIds.length;
    if (this.liveEntries === 0) return;
    let worker = this.sweepWorker;
    let record = this.sweepRecord;
    for (let checked = 0; checked < count; checked++) {
      if (worker >= workers || this.workerIds[worker] === undefined || record >= this.recordsUsed[worker]!) {
        worker = worker + 1 >= workers ? 0 : worker + 1;
        record = 0;
        continue;
      }
      this.expire(worker, record++, nowTick, nowTick);
    }
    this.sweepWorker = worker;
    this.sweepRecord = record;
  }

  /** The worker's record of a block, or −1. */
  private recordOf(worker: number, lo: number, hi: number): number {
    const slot = this.slotOf(lo, hi);
    return slot < 0 ? -1 : this.recordIn(worker, slot * slotWords);
  }

  /** The worker's record among the entries of the slot at `base`, or −1. */
  private recordIn(worker: number, base: number): number {
    const entry = this.entryIn(worker, base);
    if (entry === inlineEntry) return this.table[base + slotRecord]!;
    return entry === noEntry ? -1 : this.more[(entry - 1) * moreWords + moreRecord]!;
  }

  /** Where the worker's entry of the slot at `base` is: inline, an overflow entry + 1, or none. */
  private entryIn(worker: number, base: number): number {
    if ((this.table[base + slotHolders]! & holderBit(worker)) === 0) return noEntry;
    if (this.table[base + slotWorker] === worker + 1) return inlineEntry;
    for (let m = this.table[base + slotMore]!; m !== 0; m = this.more[(m - 1) * moreWords + moreNext]!) {
      if (this.more[(m - 1) * moreWords + moreWorker] === worker) return m;
    }
    return noEntry;
  }

  /** Makes room for `count` more records of a worker at once, so a stored chain stays contiguous. */
  private reserveRecords(worker: number, count: number): void {
    const needed = (this.recordsUsed[worker]! + count) * recordWords;
    const records = this.records[worker]!;
    if (needed <= records.length) return;
    const words = Math.max(needed, Math.ceil((records.length * recordGrowth) / recordWords) * recordWords);
    this.records[worker] = slabOf(records, this.recordsUsed[worker]!, words);
  }

  private appendRecord(worker: number, lo: number, hi: number, tier: 0 | 1, expiry: number): number {
    this.reserveRecords(worker, 1);
    const record = this.recordsUsed[worker]!++;
    const records = this.records[worker]!;
    const at = record * recordWords;
    records[at + recordLo] = lo;
    records[at + recordHi] = hi;
    records[at + recordGpu] = tier === 0 ? expiry : 0;
    records[at + recordGpu + 1] = tier === 1 ? expiry : 0;
    this.liveEntries++;
    return record;
  }

  private store(worker: number, lo: number, hi: number, tier: 0 | 1, expiry: number): void {
    const slot = this.slotOf(lo, hi);
    if (slot < 0) {
      const record = this.appendRecord(worker, lo, hi, tier, expiry);
      const base = (-1 - slot) * slotWords;
      const table = this.table;
      table[base + slotLo] = lo;
      table[base + slotHi] = hi;
      table[base + slotWorker] = worker + 1;
      table[base + slotRecord] = record;
      table[base + slotMore] = 0;
      table[base + slotHolders] = holderBit(worker);
      if (++this.distinctHashes > this.slots * maxLoad) {
        this.grow();
      } else {
        this.migrate(this.rehashStep);
        if (this.distinctHashes > this.slots * prepareLoad && this.distinctHashes % touchEvery === 0) {
          this.nextTable.touch(Math.ceil(this.slots * growth) * slotWords);
        }
      }
      return;
    }
    const base = slot * slotWords;
    const existing = this.recordIn(worker, base);
    if (existing >= 0) {
      this.records[worker]![existing * recordWords + recordGpu + tier] = expiry;
      return;
    }
    const record = this.appendRecord(worker, lo, hi, tier, expiry);
    const m = this.allocateMore();
    const at = (m - 1) * moreWords;
    this.more[at + moreWorker] = worker;
    this.more[at + moreRecord] = record;
    this.more[at + moreNext] = this.table[base + slotMore]!;
    this.table[base + slotMore] = m;
    this.table[base + slotHolders]! |= holderBit(worker);
  }

  private remove(worker: number, lo: number, hi: number, tier: 0 | 1): void {
    const record = this.recordOf(worker, lo, hi);
    if (record < 0) return;
    const records = this.records[worker]!;
    records[record * recordWords + recordGpu + tier] = 0;
    if (records[record * recordWords + recordGpu] === 0 && records[record * recordWords + recordGpu + 1] === 0) {
      this.unindex(worker, lo, hi);
    }
  }

  /**
   * Clears one tier of every record of a worker whose expiry on it is ≤ `expiredBy` (every record
   * with `maxTick`), and unindexes the records left on no tier. One pass over the worker's records.
   */
  private withdraw(worker: number, tier: 0 | 1, expiredBy: number): void {
    const gpuBy = tier === 0 ? expiredBy : 0;
    const hostBy = tier === 1 ? expiredBy : 0;
    for (let record = 0, used = this.recordsUsed[worker]!; record < used; record++) this.expire(worker, record, gpuBy, hostBy);
  }

  /**
   * Clears the record's GPU tier if its expiry is ≤ `gpuBy`, its host tier if ≤ `hostBy` (expiries
   * are ≥ 1, so 0 keeps a tier), and unindexes the record once it is on no tier.
   */
  private expire(worker: number, record: number, gpuBy: number, hostBy: number): void {
    const records = this.records[worker]!;
    const at = record * recordWords;
    const gpu = records[at + recordGpu]!;
    const host = records[at + recordGpu + 1]!;
    const gpuLeft = gpu <= gpuBy ? 0 : gpu;
    const hostLeft = host <= hostBy ? 0 : host;
    if (gpuLeft === gpu && hostLeft === host) return;
    records[at + recordGpu] = gpuLeft;
    records[at + recordGpu + 1] = hostLeft;
    if ((gpuLeft | hostLeft) === 0) this.unindex(worker, records[at + recordLo]!, records[at + recordHi]!);
  }

  /** Removes every record of a worker from the index and drops its slab. */
  private dropRecords(worker: number): void {
    this.withdraw(worker, 0, maxTick);
    this.withdraw(worker, 1, maxTick);
    this.records[worker] = noRecords;
    this.recordsUsed[worker] = 0;
    this.recordsDead[worker] = 0;
    if (worker === this.sweepWorker) this.sweepRecord = 0;
  }

  /** A worker's record went dead: remove its table entry (the record stays until compaction). */
  private unindex(worker: number, lo: number, hi: number): void {
    const slot = this.slotOf(lo, hi);
    const base = slot * slotWords;
    const table = this.table;
    const more = this.more;
    this.liveEntries--;
    this.recordsDead[worker]!++;
    if (table[base + slotWorker] === worker + 1) {
      const m = table[base + slotMore]!;
      if (m === 0) {
        this.deleteSlot(slot);
        return;
      }
      const at = (m - 1) * moreWords;
      table[base + slotWorker] = more[at + moreWorker]! + 1;
      table[base + slotRecord] = more[at + moreRecord]!;
      table[base + slotMore] = more[at + moreNext]!;
      this.freeMore(m);
      this.recountHolders(base);
      return;
    }
    let previous = 0;
    for (let m = table[base + slotMore]!; m !== 0; previous = m, m = more[(m - 1) * moreWords + moreNext]!) {
      const at = (m - 1) * moreWords;
      if (more[at + moreWorker] !== worker) continue;
      if (previous === 0) table[base + slotMore] = more[at + moreNext]!;
      else more[(previous - 1) * moreWords + moreNext] = more[at + moreNext]!;
      this.freeMore(m);
      this.recountHolders(base);
      return;
    }
  }

  private recountHolders(base: number): void {
    let holders = holderBit(this.table[base + slotWorker]! - 1);
    for (let m = this.table[base + slotMore]!; m !== 0; m = this.more[(m - 1) * moreWords + moreNext]!) {
      holders |= holderBit(this.more[(m - 1) * moreWords + moreWorker]!);
    }
    this.table[base + slotHolders] = holders;
  }

  /** Rewrites a worker's slab without its dead records once they are the majority. */
  private compactIfSparse(worker: number): void {
    const used = this.recordsUsed[worker]!;
    const dead = this.recordsDead[worker]!;
    if (dead === 0 || dead * 2 < used) return;
    const records = this.records[worker]!;
    const live = used - dead;
    let kept = 0;
    let sweepRecord = live; // where the sweep goes on if it is in this slab
    // In place: a kept record only ever moves down.
    for (let record = 0; record < used; record++) {
      if (record === this.sweepRecord) sweepRecord = kept;
      const at = record * recordWords;
      if (records[at + recordGpu] === 0 && records[at + recordGpu + 1] === 0) continue;
      if (kept !== record) records.copyWithin(kept * recordWords, at, at + recordWords);
      this.repoint(worker, records[at + recordLo]!, records[at + recordHi]!, kept++);
    }
    this.records[worker] = slabOf(records, live, live * recordWords);
    this.recordsUsed[worker] = live;
    this.recordsDead[worker] = 0;
    if (worker === this.sweepWorker) this.sweepRecord = sweepRecord;
  }

  /** Points the worker's table entry for a block at a moved record. */
  private repoint(worker: number, lo: number, hi: number, record: number): void {
    const base = this.slotOf(lo, hi) * slotWords;
    const entry = this.entryIn(worker, base);
    if (entry === inlineEntry) this.table[base + slotRecord] = record;
    else this.more[(entry - 1) * moreWords + moreRecord] = record;
  }

  /** Backward-shift deletion, so that probing never needs tombstones. */
  private deleteSlot(slot: number): void {
    const table = this.table;
    const slots = this.slots;
    let hole = slot;
    for (let i = slot + 1 === slots ? 0 : slot + 1; table[i * slotWords + slotWorker] !== 0; i = i + 1 === slots ? 0 : i + 1) {
      const home = this.home(table[i * slotWords + slotLo]!, table[i * slotWords + slotHi]!);
      if ((i - home + slots) % slots >= (i - hole + slots) % slots) {
        table.copyWithin(hole * slotWords, i * slotWords, (i + 1) * slotWords);
        hole = i;
      }
    }
    table[hole * slotWords + slotWorker] = 0;
    this.distinctHashes--;
  }

  private resize(slots: number): void {
    this.homeShift = Math.max(0, Math.ceil(Math.log2(slots)) - 21);
    this.homeScale = slots / 2 ** (32 - this.homeShift);
    this.table = this.nextTable.take(slots * slotWords);
    this.slots = slots;
  }

  private allocateMore(): number {
    if (this.moreFree !== 0) {
      const m = this.moreFree;
      this.moreFree = this.more[(m - 1) * moreWords + moreNext]!;
      return m;
    }
    const capacity = this.more.length / moreWords;
    if (this.moreUsed === capacity) this.more = resizedWords(this.more, (capacity + Math.min(capacity, moreStepEntries)) * moreWords, reservation);
    return ++this.moreUsed;
  }

  private freeMore(m: number): void {
    this.more[(m - 1) * moreWords + moreNext] = this.moreFree;
    this.moreFree = m;
  }
}
