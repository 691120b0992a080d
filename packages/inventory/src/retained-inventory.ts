import { checkBatchRoom } from './batch-room.js';
import { InvalidInventoryOptionError, InventoryEventError } from './errors.js';
import { checkFunction, checkOptionsObject } from './options.js';
import {
  checkBlocks,
  checkEvents,
  type InventoryBatch,
  type InventoryEvent,
  minExpiresAtMs,
  type RetentionTier,
} from './events.js';
import { hashWords } from './hash-words.js';
import { maxExpectedBlocks, maxTick, minRehashStep, RetainedTable } from './retained-table.js';
import type { TableChange } from './table-change.js';

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
  /**
   * Wall clock in ms since the Unix epoch (default `Date.now`); expiries are compared with it. A reading
   * that is no finite number, or below 10^11 (seconds, a monotonic clock), is refused
   * (`InvalidInventoryOptionError`) by the call that reads it, before that call changes anything.
   */
  readonly now?: () => number;
  /** Blocks to make room for up front (default 1,024, at most 2^27 = 134,217,728); the index grows as needed anyway. */
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
   * An operation checks each record once at most, however large the step.
   */
  readonly pruneStep?: number;
  /**
   * Once most of a worker's records are dead (removed or expired), its slab is compacted in place a
   * bounded number of records per `apply` of that worker: this many, plus two per block it stores
   * (default 32). Smaller spreads the work over more batches.
   */
  readonly compactStep?: number;
}

/**
 * The key of an option the package does not export: lower ceilings than 2^27 distinct blocks and 2^27
 * further holders, and less address space than 2^24 further holders' reserved up front (past which their
 * entries are copied), for tests, which cannot fill those.
 */
export const tableCeilings = Symbol('tableCeilings');
type CeilingOptions = RetainedInventoryOptions & {
  readonly [tableCeilings]?: {
    readonly maxBlocks: number;
    readonly maxFurtherHolders: number;
    readonly reservedFurtherHolders?: number;
  };
};

const tierOffset: Record<RetentionTier, 0 | 1> = { gpu: 0, host: 1 };
const secondsClockRefusal =
  `must return milliseconds since the Unix epoch, as Date.now does; a reading below ${minExpiresAtMs} (March 1973) ` +
  'is in seconds or from a monotonic clock (performance.now), against which no expiry would ever come';
const tickMs = 100;
/** A new incarnation's first batch drops every entry of the previous one before its own changes. */
const dropEverything: readonly TableChange[] = [
  { type: 'clear', tier: 0 },
  { type: 'clear', tier: 1 },
];

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
  private readonly index: RetainedTable;
  private readonly pruneStep: number;
  private readonly compactStep: number;

  private readonly workerIndex = new Map<string, number>();
  private readonly workerIds: (string | undefined)[] = [];
  private readonly incarnations: string[] = [];
  private readonly epochs: number[] = [];
  private readonly lastSeq: number[] = [];
  /** Whether the worker's incarnation has said its inventory is complete (`InventoryBatch.complete`). */
  private readonly complete: boolean[] = [];
  private readonly freeWorkers: number[] = [];
  /** The array `apply` gathers a batch's changes in, kept between batches; undefined while one is in use. */
  private spareChanges: TableChange[] | undefined = [];

  private readonly now: () => number;
  private readonly epochMs: number;

  constructor(options: RetainedInventoryOptions = {}) {
    checkOptionsObject('options', options);
    const { now = Date.now, expectedBlocks = 1024, rehashStep = 8, pruneStep = 32, compactStep = 32 } = options;
    const ceilings = (options as CeilingOptions)[tableCeilings];
    checkFunction('options.now', now);
    const wholeNumber = (option: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
      if (!Number.isSafeInteger(value) || value < min || value > max) {
        const rule = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
        throw new InvalidInventoryOptionError(`options.${option}`, value, `must be a whole number ${rule}`);
      }
      return value;
    };
    this.now = now;
    this.epochMs = this.clockMs();
    this.pruneStep = wholeNumber('pruneStep', pruneStep, 0);
    this.compactStep = wholeNumber('compactStep', compactStep, 1);
    this.index = new RetainedTable(
      wholeNumber('expectedBlocks', expectedBlocks, 0, maxExpectedBlocks),
      wholeNumber('rehashStep', rehashStep, minRehashStep),
      ceilings?.maxBlocks,
      ceilings?.maxFurtherHolders,
      ceilings?.reservedFurtherHolders,
    );
  }

  /** Retained (block, worker) entries, including expired ones not yet pruned. */
  get size(): number {
    return this.index.size;
  }

  get workerCount(): number {
    return this.workerIndex.size;
  }

  /** Bytes held by the index's typed arrays. */
  get indexBytes(): number {
    return this.index.indexBytes;
  }

  /**
   * Applies one worker's batch. A batch of a larger epoch (a newer incarnation) first drops
   * everything the worker's previous incarnation retained; a batch of a smaller epoch (a superseded
   * incarnation's) is ignored, as is a batch whose `seq` is not above the last applied one of the
   * same incarnation (both return false). It holds at most 2^27 distinct blocks and 2^27 further
   * holders of blocks: a batch that would pass either, in its order (what it removes first makes room),
   * is refused whole (`InventoryFullError`), changing nothing.
   */
  apply(batch: InventoryBatch): boolean {
    if (batch === null || typeof batch !== 'object') throw new InventoryEventError('', batch, 'a batch is an object');
    const { workerId, incarnation, epoch, seq } = batch;
    if (typeof workerId !== 'string' || workerId.length === 0) {
      throw new InventoryEventError('workerId', workerId, 'a worker id is a non-empty string');
    }
    if (typeof incarnation !== 'string' || incarnation.length === 0) {
      throw new InventoryEventError('incarnation', incarnation, 'an incarnation is a non-empty string');
    }
    if (!Number.isSafeInteger(epoch) || epoch < 1)
      throw new InventoryEventError('epoch', epoch, 'an epoch is a whole number ≥ 1');
    if (!Number.isSafeInteger(seq) || seq < 0) throw new InventoryEventError('seq', seq, 'seq is a whole number ≥ 0');
    const events = checkEvents('events', batch.events);
    if (batch.complete !== undefined && typeof batch.complete !== 'boolean') {
      throw new InventoryEventError('complete', batch.complete, 'complete is a boolean when given');
    }
    // Before any change: a clock that throws, or applies a batch itself, must find the worker as it was.
    const nowTick = this.tickOf(this.clockMs());

    let worker = this.workerIndex.get(workerId);
    if (worker !== undefined && epoch === this.epochs[worker] && incarnation !== this.incarnations[worker]) {
      throw new InventoryEventError(
        'incarnation',
        incarnation,
        `epoch ${epoch} belongs to incarnation ${this.incarnations[worker]}`,
      );
    }
    if (worker !== undefined && epoch < this.epochs[worker]!) return false;
    if (worker !== undefined && epoch === this.epochs[worker] && seq <= this.lastSeq[worker]!) return false;
    // The spare array, emptied again before returning: a batch applied from inside this one (an event's
    // getter may call apply) finds none and makes its own.
    const changes = this.spareChanges ?? [];
    this.spareChanges = undefined;
    try {
      for (const event of events) changes.push(this.tableChange(event, nowTick));
      const newIncarnation = worker !== undefined && epoch > this.epochs[worker]!;
      if (newIncarnation) changes.unshift(...dropEverything);
      checkBatchRoom(this.index, worker, changes, workerId);
      if (worker === undefined) {
        worker = this.addWorker(workerId, incarnation, epoch);
      } else if (newIncarnation) {
        this.index.dropRecords(worker);
        this.incarnations[worker] = incarnation;
        this.epochs[worker] = epoch;
        this.lastSeq[worker] = -1;
        this.complete[worker] = false;
      }
      this.lastSeq[worker] = seq;
      if (batch.complete === true) this.complete[worker] = true;
      let blocks = 0;
      let stored = 0;
      for (const change of changes) {
        this.index.change(worker, change);
        if (change.type === 'clear') continue;
        blocks += change.words.length / 2;
        if (change.type === 'store') stored += change.words.length / 2;
      }
      this.index.compact(worker, this.compactStep + 2 * stored);
      this.index.maintain(this.pruneStep + blocks, nowTick);
      return true;
    } finally {
      changes.length = 0;
      this.spareChanges = changes;
    }
  }

  /** What an event changes in the index; a `stored` event whose blocks have expired removes them. */
  private tableChange(event: InventoryEvent, nowTick: number): TableChange {
    const tier = tierOffset[event.tier];
    if (event.type === 'cleared') return { type: 'clear', tier };
    const words = hashWords(event.blocks);
    const expiry =
      event.type === 'stored' ? Math.min(maxTick, Math.ceil((event.expiresAt - this.epochMs) / tickMs)) : 0;
    return expiry > nowTick ? { type: 'store', tier, words, expiry } : { type: 'remove', tier, words };
  }

  /** Forgets a worker (its inventory lease ended, or it left). */
  removeWorker(workerId: string): boolean {
    const worker = this.workerIndex.get(workerId);
    if (worker === undefined) return false;
    this.index.releaseWorker(worker);
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
    return this.index.expireAll(this.tickOf(this.clockMs()));
  }

  /**
   * For each worker that retains at least the chain's first block: how many leading blocks of the
   * chain it retains, on which tier, most blocks first. Advisory only: see `AdvisoryRetainedPrefix`.
   */
  longestRetainedPrefix(chain: BigUint64Array | readonly bigint[]): AdvisoryRetainedPrefix[] {
    const words = hashWords(checkBlocks('chain', chain));
    const nowTick = this.tickOf(this.clockMs());
    // Before the walk: sweeping may delete slots, which shifts others.
    this.index.maintain(this.pruneStep, nowTick);
    const answer: AdvisoryRetainedPrefix[] = [];
    this.index.walk(words, nowTick, (worker, blocks, gpuBlocks, hostBlocks, leadingHostBlocks, expiryTick) =>
      answer.push(this.prefix(worker, blocks, gpuBlocks, hostBlocks, leadingHostBlocks, expiryTick)),
    );
    return answer.sort((a, b) => b.blocks - a.blocks || (a.workerId < b.workerId ? -1 : 1));
  }

  private prefix(
    worker: number,
    blocks: number,
    gpuBlocks: number,
    hostBlocks: number,
    leadingHostBlocks: number,
    expiryTick: number,
  ): AdvisoryRetainedPrefix {
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

  /**
   * The clock's reading, refused when it is no number of milliseconds since the Unix epoch: compared with
   * it, every expiry would read as expired (Infinity), as not alive (NaN) — a batch's stored blocks
   * dropped — or as decades away (seconds, or a monotonic clock's ms since the process started).
   */
  private clockMs(): number {
    const ms = this.now();
    if (typeof ms !== 'number' || !Number.isFinite(ms))
      throw new InvalidInventoryOptionError('options.now', ms, 'must return milliseconds since the Unix epoch');
    if (ms < minExpiresAtMs) throw new InvalidInventoryOptionError('options.now', ms, secondsClockRefusal);
    return ms;
  }

  private tickOf(ms: number): number {
    return Math.max(0, Math.floor((ms - this.epochMs) / tickMs));
  }

  private addWorker(workerId: string, incarnation: string, epoch: number): number {
    const worker = this.freeWorkers.pop() ?? this.workerIds.length;
    this.workerIndex.set(workerId, worker);
    this.workerIds[worker] = workerId;
    this.incarnations[worker] = incarnation;
    this.epochs[worker] = epoch;
    this.lastSeq[worker] = -1;
    this.complete[worker] = false;
    this.index.addWorker(worker);
    return worker;
  }
}
