// The table engine of the retained inventory: a hash table in typed arrays from block hashes to the
// (worker slot, record) entries that retain them, each worker slot's records in its own slab, grown
// and swept a few slots at a time. It knows worker slots, tiers (0 = GPU, 1 = host) and expiry ticks;
// what a worker, an incarnation, an event or a millisecond is, is the inventory's rules
// (retained-inventory.ts).
import { mix } from './hash-words.js';
import { type HeldBlock, heldShared, type TableChange } from './table-change.js';
import { PrefixCandidates, type PrefixFound } from './prefix-candidates.js';
import {
  moreNext,
  moreRecord,
  moreReservedEntries,
  moreWords,
  moreWorker,
  OverflowEntries,
} from './overflow-entries.js';
import { PreparedArray } from './prepared-array.js';
import { sharedWords } from './shared-words.js';

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
const movedSlot = -1;
const inlineEntry = 0;
const noEntry = -1;
export const maxTick = 0x7fffffff; // ticks stay int32: 2^31 × 100 ms is 6.8 years
const maxLoad = 0.85;
const growth = 1.5; // of the table
// A grown table starts at load maxLoad / growth and grows again at maxLoad: at least
// (maxLoad − maxLoad / growth) × growth = 0.425 × (previous slots) new blocks later. Moving 3 slots
// per new block empties the previous table by then.
export const minRehashStep = 3;
/**
 * The most distinct blocks a table holds, and so the most it is made for up front: its slots for 2^27
 * blocks take 3.8 GB already; past them its slot index would leave int32 and its words a typed array.
 */
export const maxExpectedBlocks = 2 ** 27;
/**
 * The most overflow entries (workers retaining a block beyond its first) the table holds: 1.5 GB of
 * them, and 2 GB of the records they point at, next to the 3.8 GB of a full table's slots.
 */
export const maxFurtherHolders = 2 ** 27;
// The next table (and the next overflow slab) is allocated at load `prepareLoad` and one of its pages
// touched per `touchEvery` new blocks (overflow entries), so that the kernel's page faults are spread
// out instead of hitting the first operations of a growth step at up to one per stored block. The
// next table has growth × slotWords × 4 / 4096 = 0.0088 pages per current slot, and
// (maxLoad − prepareLoad) / touchEvery = 0.0125 touches per slot come first, so it is all touched
// before it is needed (the overflow slab: 0.0015 pages and 0.05 touches per entry).
const prepareLoad = 0.8;
const touchEvery = 4;
const recordGrowth = 1.25; // of a worker's record slab
/** Up to this many workers on a chain's first block, a lookup follows each one on its own. */
const followEachLimit = 32;
const noTable = new Int32Array(0);
const noRecords = new Int32Array(0);

const holderBit = (worker: number): number => 1 << (worker & 31);

/** A worker's records in a slab of `words` words: its used records, the rest unwritten. */
function slabOf(records: Int32Array, used: number, words: number): Int32Array {
  if (words === 0) return noRecords;
  const slab = sharedWords(words);
  slab.set(records.subarray(0, used * recordWords));
  return slab;
}

/** The retained (block, worker slot) entries of the inventory, and the longest-prefix walk over them. */
export class RetainedTable {
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
  readonly maxBlocks: number;
  private readonly maxSlots: number;
  private readonly nextTable = new PreparedArray();
  // The expiry sweep's next record.
  private sweepWorker = 0;
  private sweepRecord = 0;
  private readonly overflow: OverflowEntries;
  private liveEntries = 0;
  private readonly records: Int32Array[] = [];
  private readonly recordsUsed: number[] = [];
  /** Dead records of each worker's slab, outside the part a compaction has already passed over. */
  private readonly recordsDead: number[] = [];
  // A worker's slab being compacted: its records before `compactWrite` are compacted, those from
  // `compactRead` on are not yet read, and those between are moved or dead, all with both tiers 0
  // (so the sweep, a withdrawal and a lookup pass over them as dead). −1: not being compacted.
  private readonly compactRead: number[] = [];
  private readonly compactWrite: number[] = [];
  private readonly live: boolean[] = [];

  private readonly candidates = new PrefixCandidates();
  private bases = new Int32Array(64);
  private touched = 0; // written so that the touching loads are not optimised away

  /**
   * The ceilings are below `maxExpectedBlocks` and `maxFurtherHolders`, and the overflow entries reserve
   * less than `moreReservedEntries`, only in tests, which cannot fill them.
   */
  constructor(
    expectedBlocks: number,
    rehashStep: number,
    maxBlocks = maxExpectedBlocks,
    furtherHolderCeiling = maxFurtherHolders,
    reservedFurtherHolders = moreReservedEntries,
  ) {
    this.rehashStep = rehashStep;
    this.maxBlocks = maxBlocks;
    this.overflow = new OverflowEntries(furtherHolderCeiling, reservedFurtherHolders);
    this.maxSlots = Math.ceil(maxBlocks / maxLoad);
    this.table = noTable;
    this.resize(Math.ceil(Math.max(16, expectedBlocks) / maxLoad));
  }

  /** Retained (block, worker) entries, including expired ones not yet freed. */
  get size(): number {
    return this.liveEntries;
  }

  /** How many more distinct blocks the table holds. */
  get room(): number {
    return this.maxBlocks - this.distinctHashes;
  }

  /** How many more overflow entries (workers retaining a block beyond its first) the table holds. */
  get furtherHolderRoom(): number {
    return this.overflow.room;
  }

  /** The most overflow entries the table holds. */
  get maxFurtherHolders(): number {
    return this.overflow.most;
  }

  /**
   * A worker's entry of a block as the table holds it (`worker` undefined: a worker without a slot,
   * which holds nothing); moves nothing.
   */
  heldBlock(worker: number | undefined, lo: number, hi: number): HeldBlock {
    let slots = this.table;
    let slot = this.probe(lo, hi);
    if (slot < 0 && this.previousSlots !== 0) {
      slots = this.previous;
      slot = this.previousSlotOf(lo, hi);
    }
    if (slot < 0) return 0;
    const base = slot * slotWords;
    const more = this.overflow.words;
    let record = worker !== undefined && slots[base + slotWorker] === worker + 1 ? slots[base + slotRecord]! : -1;
    let holders = 1;
    for (let m = slots[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
      holders++;
      if (more[(m - 1) * moreWords + moreWorker] === worker) record = more[(m - 1) * moreWords + moreRecord]!;
    }
    if (record < 0) return heldShared;
    const records = this.records[worker!]!;
    const at = record * recordWords;
    const gpu = records[at + recordGpu] === 0 ? 0 : 1;
    const host = records[at + recordGpu + 1] === 0 ? 0 : 2;
    return gpu | host | (holders > 1 ? heldShared : 0);
  }

  /** Calls `visit` with the hash of each block the worker retains (on either tier). */
  forEachHeld(worker: number, visit: (lo: number, hi: number) => void): void {
    const records = this.records[worker]!;
    for (let at = 0, end = this.recordsUsed[worker]! * recordWords; at < end; at += recordWords) {
      if ((records[at + recordGpu]! | records[at + recordGpu + 1]!) !== 0)
        visit(records[at + recordLo]!, records[at + recordHi]!);
    }
  }

  /** Bytes held by the index's typed arrays. */
  get indexBytes(): number {
    return this.records.reduce(
      (bytes, records) => bytes + records.byteLength,
      this.table.byteLength + this.previous.byteLength + this.nextTable.byteLength + this.overflow.byteLength,
    );
  }

  /** Makes worker slot `worker` (a free one, or the next) ready to hold records. */
  addWorker(worker: number): void {
    this.live[worker] = true;
    this.records[worker] = noRecords;
    this.recordsUsed[worker] = 0;
    this.recordsDead[worker] = 0;
    this.compactRead[worker] = -1;
    this.candidates.addWorker(worker);
  }

  /** Removes every record of worker slot `worker` and frees the slot. */
  releaseWorker(worker: number): void {
    this.dropRecords(worker);
    this.live[worker] = false;
  }

  /** Frees every record that expired by `nowTick` and compacts; returns how many (block, worker) entries were freed. */
  expireAll(nowTick: number): number {
    const before = this.liveEntries;
    for (let worker = 0; worker < this.records.length; worker++) {
      if (this.live[worker] !== true) continue;
      for (let record = 0, used = this.recordsUsed[worker]!; record < used; record++)
        this.expire(worker, record, nowTick, nowTick);
      this.compact(worker, Number.POSITIVE_INFINITY);
    }
    return before - this.liveEntries;
  }

  /**
   * Calls `report` once for each worker slot that retains at least the first block of `words` (a chain as
   * (lo, hi) pairs) unexpired at `nowTick`, with how many leading blocks it retains, on which tier,
   * and the earliest expiry tick among them.
   */
  walk(words: Int32Array, nowTick: number, report: PrefixFound): void {
    const blocks = words.length / 2;
    if (blocks === 0) return;
    const first = this.slotOf(words[0]!, words[1]!);
    if (first < 0) return;
    const table = this.table;
    const more = this.overflow.words;
    const base = first * slotWords;
    // Count the holders and touch each one's first record: those loads do not depend on each other,
    // so their cache misses overlap before the walks begin (JavaScript has no prefetch instruction).
    let holders = 1;
    let touched = this.records[table[base + slotWorker]! - 1]![table[base + slotRecord]! * recordWords]!;
    for (let m = table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
      holders++;
      touched ^=
        this.records[more[(m - 1) * moreWords + moreWorker]!]![more[(m - 1) * moreWords + moreRecord]! * recordWords]!;
    }
    this.touched = touched;
    if (holders > followEachLimit) {
      this.followTogether(words, blocks, nowTick, report);
    } else {
      this.followOne(table[base + slotWorker]! - 1, table[base + slotRecord]!, words, blocks, nowTick, report);
      for (let m = table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
        const at = (m - 1) * moreWords;
        this.followOne(more[at + moreWorker]!, more[at + moreRecord]!, words, blocks, nowTick, report);
      }
    }
  }

  /**
   * Follows one worker from its record of the chain's first block: along its own records while
   * they continue the chain, through the table where they do not. Adds its prefix, if any.
   */
  private followOne(
    worker: number,
    start: number,
    words: Int32Array,
    blocks: number,
    nowTick: number,
    report: PrefixFound,
  ): void {
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
      if (
        at < end &&
        records[at + recordLo] === lo &&
        records[at + recordHi] === hi &&
        (records[at + recordGpu]! | records[at + recordGpu + 1]!) !== 0
      ) {
        continue;
      }
      const record = this.recordOf(worker, lo, hi);
      if (record < 0) break;
      at = record * recordWords;
    }
    if (depth > 0) report(worker, depth, gpuBlocks, hostBlocks, leadingHost, expiry);
  }

  /**
   * Many workers retain the first block: resolve every block's slot once, walk each block's
   * entries once and advance every worker whose prefix reached it (marked per lookup), instead of
   * searching each worker's entry in long lists.
   */
  private followTogether(words: Int32Array, blocks: number, nowTick: number, report: PrefixFound): void {
    if (this.bases.length < blocks) this.bases = new Int32Array(blocks);
    const bases = this.bases;
    let found = 0;
    while (found < blocks) {
      const slot = this.slotOf(words[2 * found]!, words[2 * found + 1]!);
      if (slot < 0) break;
      bases[found++] = slot * slotWords;
    }
    const table = this.table;
    const more = this.overflow.words;
    const candidates = this.candidates;
    candidates.begin();
    for (let depth = 0; depth < found; depth++) {
      const base = bases[depth]!;
      let advanced = this.visit(table[base + slotWorker]! - 1, table[base + slotRecord]!, depth, nowTick);
      for (let m = table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
        const at = (m - 1) * moreWords;
        advanced += this.visit(more[at + moreWorker]!, more[at + moreRecord]!, depth, nowTick);
      }
      if (advanced === 0) break;
    }
    candidates.report(report);
  }

  /** Hands `followTogether`'s candidates one (worker, block) entry met at `depth`: 1 if the worker's prefix grew. */
  private visit(worker: number, record: number, depth: number, nowTick: number): number {
    const records = this.records[worker]!;
    const at = record * recordWords;
    return this.candidates.visit(worker, depth, records[at + recordGpu]!, records[at + recordGpu + 1]!, nowTick);
  }

  // Below maxSlots < 2^31 as well, so `| 0` keeps it exact.
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
      if (previous[base + slotWorker]! > 0)
        this.move(slot, -1 - this.probe(previous[base + slotLo]!, previous[base + slotHi]!));
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
    this.resize(this.nextSlots());
  }

  /** The slots of the next table: `growth` times more, up to the ceiling (`checkBatchRoom` keeps the load below maxLoad there). */
  private nextSlots(): number {
    return Math.min(Math.ceil(this.slots * growth), this.maxSlots);
  }

  /** Bounded background work of one operation: a step of the table's growth, a step of the expiry sweep. */
  maintain(sweepRecords: number, nowTick: number): void {
    this.migrate(this.rehashStep);
    this.sweep(sweepRecords, nowTick);
  }

  /**
   * Checks the next `count` records, in turn over every worker, and frees what expired; each record at
   * most once, however large `count` is.
   */
  private sweep(count: number, nowTick: number): void {
    const workers = this.records.length;
    if (this.liveEntries === 0) return;
    let worker = this.sweepWorker;
    let record = this.sweepRecord;
    // The first record checked: met again, every record has been (nothing moves records during a sweep).
    let firstWorker = -1;
    let firstRecord = -1;
    for (let checked = 0; checked < count; checked++) {
      if (worker >= workers || this.live[worker] !== true || record >= this.recordsUsed[worker]!) {
        worker = worker + 1 >= workers ? 0 : worker + 1;
        record = 0;
        continue;
      }
      if (worker === firstWorker && record === firstRecord) break;
      if (firstWorker < 0) {
        firstWorker = worker;
        firstRecord = record;
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
    return entry === noEntry ? -1 : this.overflow.words[(entry - 1) * moreWords + moreRecord]!;
  }

  /** Where the worker's entry of the slot at `base` is: inline, an overflow entry + 1, or none. */
  private entryIn(worker: number, base: number): number {
    if ((this.table[base + slotHolders]! & holderBit(worker)) === 0) return noEntry;
    if (this.table[base + slotWorker] === worker + 1) return inlineEntry;
    const more = this.overflow.words;
    for (let m = this.table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
      if (more[(m - 1) * moreWords + moreWorker] === worker) return m;
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

  /** Makes one change of a batch to a worker's entries; the blocks one change stores lie contiguous in its slab. */
  change(worker: number, change: TableChange): void {
    if (change.type === 'clear') {
      this.withdraw(worker, change.tier, maxTick);
      return;
    }
    const { tier, words } = change;
    if (change.type === 'remove') {
      for (let i = 0; i < words.length; i += 2) this.remove(worker, words[i]!, words[i + 1]!, tier);
      return;
    }
    this.reserveRecords(worker, words.length / 2);
    for (let i = 0; i < words.length; i += 2) this.store(worker, words[i]!, words[i + 1]!, tier, change.expiry);
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
        const next = this.nextSlots();
        if (
          next > this.slots &&
          this.distinctHashes > this.slots * prepareLoad &&
          this.distinctHashes % touchEvery === 0
        ) {
          this.nextTable.touch(next * slotWords);
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
    this.table[base + slotMore] = this.overflow.add(worker, record, this.table[base + slotMore]!);
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
    for (let record = 0, used = this.recordsUsed[worker]!; record < used; record++)
      this.expire(worker, record, gpuBy, hostBy);
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
  dropRecords(worker: number): void {
    this.withdraw(worker, 0, maxTick);
    this.withdraw(worker, 1, maxTick);
    this.records[worker] = noRecords;
    this.recordsUsed[worker] = 0;
    this.recordsDead[worker] = 0;
    this.compactRead[worker] = -1;
    if (worker === this.sweepWorker) this.sweepRecord = 0;
  }

  /** A worker's record went dead: remove its table entry (the record stays until compaction). */
  private unindex(worker: number, lo: number, hi: number): void {
    const slot = this.slotOf(lo, hi);
    const base = slot * slotWords;
    const table = this.table;
    const more = this.overflow.words;
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
      this.overflow.release(m);
      this.recountHolders(base);
      return;
    }
    let previous = 0;
    for (let m = table[base + slotMore]!; m !== 0; previous = m, m = more[(m - 1) * moreWords + moreNext]!) {
      const at = (m - 1) * moreWords;
      if (more[at + moreWorker] !== worker) continue;
      if (previous === 0) table[base + slotMore] = more[at + moreNext]!;
      else more[(previous - 1) * moreWords + moreNext] = more[at + moreNext]!;
      this.overflow.release(m);
      this.recountHolders(base);
      return;
    }
  }

  private recountHolders(base: number): void {
    let holders = holderBit(this.table[base + slotWorker]! - 1);
    const more = this.overflow.words;
    for (let m = this.table[base + slotMore]!; m !== 0; m = more[(m - 1) * moreWords + moreNext]!) {
      holders |= holderBit(more[(m - 1) * moreWords + moreWorker]!);
    }
    this.table[base + slotHolders] = holders;
  }

  /**
   * Compacts a worker's slab in place, `budget` records at a time: once most of its records are dead,
   * each call moves the next `budget` records down over the dead ones, so that no call costs more
   * than that however large the slab. Records stored meanwhile are appended and compacted in turn.
   */
  compact(worker: number, budget: number): void {
    let read = this.compactRead[worker]!;
    const used = this.recordsUsed[worker]!;
    if (read < 0) {
      const dead = this.recordsDead[worker]!;
      if (dead === 0 || dead * 2 < used) return;
      read = 0;
      this.compactWrite[worker] = 0;
    }
    const records = this.records[worker]!;
    let kept = this.compactWrite[worker]!;
    for (const end = Math.min(used, read + budget); read < end; read++) {
      const at = read * recordWords;
      if ((records[at + recordGpu]! | records[at + recordGpu + 1]!) === 0) {
        this.recordsDead[worker]!--;
        continue;
      }
      if (kept !== read) {
        records.copyWithin(kept * recordWords, at, at + recordWords);
        records[at + recordGpu] = 0;
        records[at + recordGpu + 1] = 0;
      }
      this.repoint(worker, records[at + recordLo]!, records[at + recordHi]!, kept++);
    }
    this.compactWrite[worker] = kept;
    this.compactRead[worker] = read;
    if (read === used) this.compacted(worker, kept);
  }

  /**
   * A compaction read the whole slab: the worker has `live` records. The slab keeps its pages unless
   * three quarters of it are unused (then it is copied to a smaller one, of `recordGrowth` × `live`).
   */
  private compacted(worker: number, live: number): void {
    this.recordsUsed[worker] = live;
    this.compactRead[worker] = -1;
    const records = this.records[worker]!;
    if (live * recordWords * 4 <= records.length)
      this.records[worker] = slabOf(records, live, Math.ceil(live * recordGrowth) * recordWords);
  }

  /** Points the worker's table entry for a block at a moved record. */
  private repoint(worker: number, lo: number, hi: number, record: number): void {
    const base = this.slotOf(lo, hi) * slotWords;
    const entry = this.entryIn(worker, base);
    if (entry === inlineEntry) this.table[base + slotRecord] = record;
    else this.overflow.words[(entry - 1) * moreWords + moreRecord] = record;
  }

  /** Backward-shift deletion, so that probing never needs tombstones. */
  private deleteSlot(slot: number): void {
    const table = this.table;
    const slots = this.slots;
    let hole = slot;
    for (
      let i = slot + 1 === slots ? 0 : slot + 1;
      table[i * slotWords + slotWorker] !== 0;
      i = i + 1 === slots ? 0 : i + 1
    ) {
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
}
