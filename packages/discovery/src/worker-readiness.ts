import { assembleWorker, type RankId, type RankPart, type Worker } from '@kvreuse/descriptors';
import { messageOf } from '@kvreuse/errors';
import { entryText } from './common.js';
import type { DiscoveryEntry, DiscoveryStore, DiscoveryWatch, WatchNotice } from './types.js';
import type { RankPartRefusedError } from './errors.js';
import {
  checkArray,
  checkFunction,
  checkNonEmptyString,
  checkOptionalString,
  checkOptionsObject,
  checkStore,
} from './options.js';
import type { ReadinessGate } from './gate.js';
import { workerEpochKey, workerKeyPrefix, workerPartsPrefix } from './rank-part-keys.js';
import { safeDecodeRankPartRecord } from './rank-part-record.js';

/** Why a worker is not ready; `message` says it in words. */
export type NotReadyReason =
  | { readonly kind: 'no-parts'; readonly message: string }
  | {
      readonly kind: 'incomplete';
      readonly message: string;
      readonly missing: readonly RankId[];
      readonly duplicates: readonly RankId[];
      readonly conflicts: readonly { readonly rank: RankId; readonly field: string }[];
    }
  | { readonly kind: 'gate'; readonly message: string; readonly gate: string }
  /** The worker serves GPU memory (a `vram` bank) and no admission gate is installed: GPU memory fails closed. */
  | { readonly kind: 'no-admission-gate'; readonly message: string; readonly vramBanks: readonly VramBank[] }
  | {
      /** Only parts of an incarnation that a newer one (with a larger epoch) superseded are published. */
      readonly kind: 'superseded';
      readonly message: string;
      /** The superseded incarnation whose parts are still published, and its epoch. */
      readonly stale: { readonly incarnation: string; readonly epoch: number };
    }
  | {
      /**
       * No valid part is of the incarnation that holds the worker's epoch fence at the fence's epoch: the
       * fence is absent, or the parts published claim an epoch the fence does not hold (above it, or its
       * epoch with another incarnation: a record replayed or written around the fence).
       */
      readonly kind: 'fence-mismatch';
      readonly message: string;
      /** The worker's epoch fence, if it has one. */
      readonly fence: { readonly incarnation: string; readonly epoch: number } | undefined;
      /** The incarnations and epochs the refused parts claim. */
      readonly claimed: readonly { readonly incarnation: string; readonly epoch: number }[];
    }
  | { readonly kind: 'discovery-outage'; readonly message: string };

/** A `vram` bank of a published rank part: the rank and the bank's index in its part. */
export interface VramBank {
  readonly rank: RankId;
  readonly index: number;
}

export type WorkerReadiness =
  | {
      readonly ready: true;
      readonly workerId: string;
      readonly incarnation: string;
      readonly epoch: number;
      readonly worker: Worker;
    }
  | {
      readonly ready: false;
      readonly workerId: string;
      readonly incarnation: string | undefined;
      readonly reasons: readonly NotReadyReason[];
    };

export interface WatchWorkerReadinessOptions {
  /** Every gate must pass for the worker to be ready. */
  readonly gates?: readonly ReadinessGate[];
  /**
   * The deployment-profile admission gate (supplied by profile admission). It must pass like any
   * gate; and a worker with any `vram` bank is never ready without it (`no-admission-gate`).
   */
  readonly admissionGate?: ReadinessGate;
  /** Called with every change of readiness, in order, starting with the initial state. */
  readonly onChange: (readiness: WorkerReadiness) => void;
  /** Where refused parts are reported (default `console`). */
  readonly logger?: { warn(message: string): void };
  readonly keyPrefix?: string;
}

export interface WorkerReadinessWatch {
  readonly current: WorkerReadiness;
  /** Resolves once every change seen so far has been evaluated and reported. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

interface StoredPart {
  readonly key: string;
  readonly modRevision: number;
  /** Undefined for a part that was refused. */
  readonly part: RankPart | undefined;
  readonly epoch: number;
}

/** The worker's newest claimed epoch and the incarnation that claimed it (its epoch fence). */
interface EpochFence {
  readonly epoch: number;
  readonly incarnation: string;
}

/** What the tracker knew after one notice. */
interface ObservedState {
  readonly parts: readonly StoredPart[];
  readonly fence: EpochFence | undefined;
  readonly outage: string | undefined;
}

/**
 * Follows one worker's rank parts and epoch fence in discovery and reports its readiness: ready
 * only when the valid parts of the incarnation holding its epoch fence, at the fence's epoch — the
 * backend's revision of the claim, never a record's own word — assemble
 * into a complete worker (every rank exactly once, consistent — a part exists only after its rank
 * registered), no newer incarnation has claimed a larger epoch, and every gate passes. An older
 * incarnation is never reported ready once a newer epoch exists. GPU memory fails closed: a worker
 * with any `vram` bank is ready only if `admissionGate` is installed and passes. A lease that
 * expires, a withdrawn part, a failing gate or a discovery outage withdraws readiness. Parts are
 * validated like any input; a refused part is logged once and ignored.
 */
export async function watchWorkerReadiness(
  store: DiscoveryStore,
  workerId: string,
  options: WatchWorkerReadinessOptions,
): Promise<WorkerReadinessWatch> {
  checkWatchOptions(store, options);
  const tracker = new ReadinessTracker(store, workerId, options);
  await tracker.start();
  return tracker;
}

class ReadinessTracker implements WorkerReadinessWatch {
  readonly #store: DiscoveryStore;
  readonly #workerId: string;
  readonly #prefix: string;
  readonly #options: WatchWorkerReadinessOptions;
  readonly #partsPrefix: string;
  readonly #fenceKey: string;
  readonly #parts = new Map<string, StoredPart>();
  #fence: EpochFence | undefined;
  readonly #unsubscribes: (() => void)[] = [];
  #watch: DiscoveryWatch | undefined;
  #outage: string | undefined;
  #queue: Promise<void> = Promise.resolve();
  #current: WorkerReadiness;
  #reported: string | undefined;
  #closed = false;
  /** The writes (key and revision) of contradicting parts already logged, of those still stored. */
  readonly #loggedContradictions = new Set<string>();

  constructor(store: DiscoveryStore, workerId: string, options: WatchWorkerReadinessOptions) {
    this.#store = store;
    this.#workerId = workerId;
    this.#prefix = workerKeyPrefix(workerId, options.keyPrefix);
    this.#partsPrefix = workerPartsPrefix(workerId, options.keyPrefix);
    this.#fenceKey = workerEpochKey(workerId, options.keyPrefix);
    this.#options = options;
    this.#current = { ready: false, workerId, incarnation: undefined, reasons: [noParts] };
  }

  get current(): WorkerReadiness {
    return this.#current;
  }

  async start(): Promise<void> {
    const snapshot = await this.#store.list(this.#prefix);
    this.#replace(snapshot.entries);
    this.#watch = await this.#store.watch(this.#prefix, (notice) => this.#onNotice(notice), {
      fromRevision: snapshot.revision + 1,
    });
    try {
      for (const gate of this.#gates()) {
        const unsubscribe = gate.subscribe?.(() => this.#schedule());
        if (unsubscribe !== undefined) this.#unsubscribes.push(unsubscribe);
      }
    } catch (error) {
      // The caller never gets this tracker to close: close the watch and the subscriptions opened so far.
      await this.close();
      throw error;
    }
    this.#schedule();
    await this.settled();
  }

  settled(): Promise<void> {
    return this.#queue;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const unsubscribe of this.#unsubscribes.splice(0)) unsubscribe();
    await this.#watch?.close();
    await this.#queue;
  }

  /** The admission gate (if installed) and the other gates, in the order they are evaluated. */
  #gates(): readonly ReadinessGate[] {
    const { admissionGate, gates = [] } = this.#options;
    return admissionGate === undefined ? gates : [admissionGate, ...gates];
  }

  #onNotice(notice: WatchNotice): void {
    switch (notice.type) {
      case 'changes':
        for (const event of notice.events) {
          if (event.type === 'put') this.#record(event.entry);
          else if (event.key === this.#fenceKey) this.#fence = undefined;
          else this.#parts.delete(event.key);
        }
        break;
      case 'resync':
        this.#replace(notice.snapshot.entries);
        break;
      case 'outage':
        this.#outage = notice.error.message;
        break;
      case 'restored':
        this.#outage = undefined;
        break;
    }
    this.#schedule();
  }

  #replace(entries: readonly DiscoveryEntry[]): void {
    const previous = new Map(this.#parts);
    this.#parts.clear();
    this.#fence = undefined;
    for (const entry of entries) {
      const known = previous.get(entry.key);
      if (known !== undefined && known.modRevision === entry.modRevision) this.#parts.set(entry.key, known);
      else this.#record(entry);
    }
  }

  /**
   * Takes in the epoch fence, or validates a stored part once per write (a refused one is logged
   * and kept only as "present but refused"); other keys of the worker (its epoch records) are not
   * readiness's concern.
   */
  #record(entry: DiscoveryEntry): void {
    if (entry.key === this.#fenceKey) {
      this.#fence = { epoch: entry.modRevision, incarnation: fenceIncarnation(entry) };
      return;
    }
    if (!entry.key.startsWith(this.#partsPrefix)) return;
    const decoded = safeDecodeRankPartRecord(entry.key, entry.value, this.#options.keyPrefix);
    if (!decoded.success) this.#logRefusal(decoded.error);
    this.#parts.set(
      entry.key,
      decoded.success
        ? { key: entry.key, modRevision: entry.modRevision, ...decoded.data }
        : { key: entry.key, modRevision: entry.modRevision, part: undefined, epoch: 0 },
    );
  }

  /** Logs, once per write, each valid part whose record claims an epoch the fence does not hold. */
  #logContradictions(parts: readonly StoredPart[], fence: EpochFence | undefined): void {
    for (const { key, modRevision, part, epoch } of parts) {
      const written = writeOf(key, modRevision);
      if (this.#loggedContradictions.has(written)) continue;
      this.#loggedContradictions.add(written);
      (this.#options.logger ?? console).warn(
        `kvreuse discovery: worker ${this.#workerId}: rank part at ${JSON.stringify(key)} refused: incarnation ${part?.incarnation} claims epoch ${epoch}, ${describeFence(fence)}; it does not count towards readiness`,
      );
    }
  }

  /** Forgets the logged writes no longer stored: one overwritten or deleted never comes back. */
  #forgetLoggedWritesGone(stored: readonly StoredPart[]): void {
    if (this.#loggedContradictions.size === 0) return;
    const storedWrites = new Set(stored.map(({ key, modRevision }) => writeOf(key, modRevision)));
    for (const written of this.#loggedContradictions) {
      if (!storedWrites.has(written)) this.#loggedContradictions.delete(written);
    }
  }

  #logRefusal(error: RankPartRefusedError): void {
    (this.#options.logger ?? console).warn(
      `kvreuse discovery: worker ${this.#workerId}: ${error.message}; it does not count towards readiness`,
    );
  }

  /** Queues an evaluation of the state as it is now, so that every state is judged and reported in order. */
  #schedule(): void {
    const state: ObservedState = { parts: [...this.#parts.values()], fence: this.#fence, outage: this.#outage };
    this.#queue = this.#queue
      .then(() => this.#evaluate(state))
      .catch((error: unknown) => {
        (this.#options.logger ?? console).warn(
          `kvreuse discovery: worker ${this.#workerId}: a readiness listener threw: ${String(error)}`,
        );
      });
  }

  async #evaluate(state: ObservedState): Promise<void> {
    if (this.#closed) return;
    const readiness = await this.#compute(state);
    if (this.#closed) return;
    this.#current = readiness;
    const signature = signatureOf(readiness);
    if (signature === this.#reported) return;
    this.#reported = signature;
    this.#options.onChange(readiness);
  }

  async #compute({ parts: stored, fence, outage }: ObservedState): Promise<WorkerReadiness> {
    const workerId = this.#workerId;
    const notReady = (incarnation: string | undefined, reasons: NotReadyReason[]): WorkerReadiness => ({
      ready: false,
      workerId,
      incarnation,
      reasons,
    });
    this.#forgetLoggedWritesGone(stored);
    if (outage !== undefined) {
      return notReady(undefined, [{ kind: 'discovery-outage', message: `discovery is unreachable: ${outage}` }]);
    }
    const fenced = fencedIncarnation(stored, fence);
    if (fenced.kind === 'none') return notReady(undefined, [noParts]);
    this.#logContradictions(fenced.contradicting, fence);
    if (fenced.kind !== 'current') return notReady(fence?.incarnation, [fenced.reason]);
    const { parts, epoch } = fenced;
    const first = parts[0]!;
    const assembled = assembleWorker(parts);
    if (!assembled.complete) {
      return notReady(first.incarnation, [
        {
          kind: 'incomplete',
          message: describeIncomplete(assembled),
          missing: assembled.missing,
          duplicates: assembled.duplicates.map((duplicate) => duplicate.rank),
          conflicts: assembled.conflicts.map(({ rank, field }) => ({ rank, field })),
        },
      ]);
    }
    const failures: NotReadyReason[] = [];
    const vramBanks = vramBanksOf(assembled.worker);
    const [firstVram] = vramBanks;
    if (firstVram !== undefined && this.#options.admissionGate === undefined) {
      failures.push({
        kind: 'no-admission-gate',
        vramBanks,
        message: `${vramBanks.length} vram banks (the first: bank ${firstVram.index} of rank (tp ${firstVram.rank.tpRank}, pp ${firstVram.rank.ppRank})) are served only behind an admission gate, and none is installed (admissionGate)`,
      });
    }
    for (const gate of this.#gates()) {
      let reason: string | undefined;
      try {
        const verdict = await gate.evaluate(assembled.worker);
        if (!verdict.pass) reason = verdict.reason;
      } catch (error) {
        reason = `the gate threw: ${messageOf(error)}`;
      }
      if (reason !== undefined)
        failures.push({ kind: 'gate', gate: gate.name, message: `gate ${gate.name} refused: ${reason}` });
    }
    if (failures.length > 0) return notReady(first.incarnation, failures);
    return { ready: true, workerId, incarnation: first.incarnation, epoch, worker: assembled.worker };
  }
}

const noParts: NotReadyReason = { kind: 'no-parts', message: 'no valid rank part is published' };

type Fenced =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'current';
      readonly parts: RankPart[];
      readonly epoch: number;
      readonly contradicting: StoredPart[];
    }
  | { readonly kind: 'superseded' | 'mismatch'; readonly reason: NotReadyReason; readonly contradicting: StoredPart[] };

/**
 * The valid parts of the incarnation that holds the worker's epoch fence, at the fence's epoch: the
 * epoch is the backend's (the revision of the claim), never a record's word for it. A part whose record
 * claims more than the fence, or the fence's epoch with another incarnation, contradicts it and never
 * counts; parts of epochs below the fence are of superseded incarnations. Which incarnation counts
 * depends on the fence alone, never on the order of the keys, so every watcher agrees.
 */
function fencedIncarnation(stored: readonly StoredPart[], fence: EpochFence | undefined): Fenced {
  const valid = stored.filter((entry): entry is StoredPart & { part: RankPart } => entry.part !== undefined);
  if (valid.length === 0) return { kind: 'none' };
  const current = valid.filter(
    ({ part, epoch }) => fence !== undefined && epoch === fence.epoch && part.incarnation === fence.incarnation,
  );
  const stale = valid.filter(({ epoch }) => fence !== undefined && epoch < fence.epoch);
  const contradicting = valid.filter((entry) => !current.includes(entry) && !stale.includes(entry));
  if (current.length > 0) {
    return { kind: 'current', parts: current.map(({ part }) => part), epoch: fence!.epoch, contradicting };
  }
  const newestStale = stale.reduce<(typeof stale)[number] | undefined>(
    (newest, entry) => (newest === undefined || entry.epoch > newest.epoch ? entry : newest),
    undefined,
  );
  if (fence !== undefined && newestStale !== undefined && contradicting.length === 0) {
    const stale = { incarnation: newestStale.part.incarnation, epoch: newestStale.epoch };
    const message = `incarnation ${stale.incarnation} (epoch ${stale.epoch}) is superseded by incarnation ${fence.incarnation} (epoch ${fence.epoch}), which has published no part yet`;
    return { kind: 'superseded', reason: { kind: 'superseded', message, stale }, contradicting };
  }
  const claimed = uniqueClaims(contradicting);
  const message = `the rank parts published claim ${claimed.map(({ incarnation, epoch }) => `incarnation ${incarnation} at epoch ${epoch}`).join(', ')}, ${describeFence(fence)}`;
  return {
    kind: 'mismatch',
    reason: { kind: 'fence-mismatch', message, fence, claimed },
    contradicting,
  };
}

function uniqueClaims(parts: readonly StoredPart[]): { incarnation: string; epoch: number }[] {
  const claims = new Map<string, { incarnation: string; epoch: number }>();
  for (const { part, epoch } of parts) {
    if (part !== undefined) claims.set(`${epoch} ${part.incarnation}`, { incarnation: part.incarnation, epoch });
  }
  return [...claims.values()].sort((a, b) => a.epoch - b.epoch || (a.incarnation < b.incarnation ? -1 : 1));
}

/** Names one write of a part: its key and the revision that wrote it. */
function writeOf(key: string, modRevision: number): string {
  return `${key} ${modRevision}`;
}

function describeFence(fence: EpochFence | undefined): string {
  return fence === undefined
    ? 'and the worker has no epoch fence'
    : `but the epoch fence holds incarnation ${fence.incarnation} at epoch ${fence.epoch}`;
}

/** The fence's value names the incarnation that claimed the epoch; unreadable bytes are named as such. */
function fenceIncarnation(entry: DiscoveryEntry): string {
  try {
    return entryText(entry);
  } catch {
    return '(unreadable)';
  }
}

function vramBanksOf(worker: Worker): VramBank[] {
  return worker.ranks.flatMap((part) =>
    part.banks.flatMap((bank, index) =>
      bank.memKind === 'vram' ? [{ rank: { tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank }, index }] : [],
    ),
  );
}

function describeIncomplete(result: Extract<ReturnType<typeof assembleWorker>, { complete: false }>): string {
  const rank = (r: RankId): string => `(tp ${r.tpRank}, pp ${r.ppRank})`;
  return [
    result.missing.length > 0 ? `missing ranks ${result.missing.map(rank).join(', ')}` : undefined,
    result.duplicates.length > 0
      ? `duplicate ranks ${result.duplicates.map((d) => rank(d.rank)).join(', ')}`
      : undefined,
    result.conflicts.length > 0
      ? `inconsistent ${result.conflicts.map((c) => `${c.field} of rank ${rank(c.rank)}`).join(', ')}`
      : undefined,
  ]
    .filter((text) => text !== undefined)
    .join('; ');
}

function signatureOf(readiness: WorkerReadiness): string {
  return readiness.ready
    ? `ready ${readiness.incarnation} ${readiness.epoch} ${readiness.worker.ranks.map((part) => part.transport.generation).join(',')}`
    : `not ready ${readiness.incarnation ?? ''} ${readiness.reasons.map((reason) => reason.message).join(' | ')}`;
}

/** A gate: an object with its `name`, its `evaluate` and, when it has one, its `subscribe`. */
function checkGate(gate: unknown, option: string): void {
  const { name, evaluate, subscribe } = checkOptionsObject(option, gate) as Partial<ReadinessGate>;
  checkNonEmptyString(`${option}.name`, name);
  checkFunction(`${option}.evaluate`, evaluate);
  if (subscribe !== undefined) checkFunction(`${option}.subscribe`, subscribe);
}

function checkWatchOptions(store: DiscoveryStore, options: WatchWorkerReadinessOptions): void {
  checkStore('store', store);
  checkOptionsObject('options', options);
  checkFunction('options.onChange', options.onChange);
  if (options.gates !== undefined) checkArray('options.gates', options.gates, checkGate);
  if (options.admissionGate !== undefined) checkGate(options.admissionGate, 'options.admissionGate');
  if (options.logger !== undefined)
    checkFunction('options.logger.warn', checkOptionsObject('options.logger', options.logger).warn);
  checkOptionalString('options.keyPrefix', options.keyPrefix);
}
