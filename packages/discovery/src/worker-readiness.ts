import { assembleWorker, type RankId, type RankPart, type Worker } from '@kvreuse/descriptors';
import { entryText } from './common.js';
import type { DiscoveryEntry, DiscoveryStore, DiscoveryWatch, WatchNotice } from './types.js';
import type { RankPartRefusedError } from './errors.js';
import { checkArray, checkFunction, checkOptionalString, checkOptionsObject, checkStore } from './options.js';
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
 * only when the valid parts of its newest incarnation — the one with the largest epoch — assemble
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
    for (const gate of this.#gates()) {
      const unsubscribe = gate.subscribe?.(() => this.#schedule());
      if (unsubscribe !== undefined) this.#unsubscribes.push(unsubscribe);
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
        ? { modRevision: entry.modRevision, ...decoded.data }
        : { modRevision: entry.modRevision, part: undefined, epoch: 0 },
    );
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
    if (outage !== undefined) {
      return notReady(undefined, [{ kind: 'discovery-outage', message: `discovery is unreachable: ${outage}` }]);
    }
    const newest = newestIncarnation(stored);
    if (newest === undefined) return notReady(undefined, [noParts]);
    const { parts, epoch } = newest;
    const first = parts[0]!;
    if (fence !== undefined && fence.epoch > epoch) {
      const stale = { incarnation: first.incarnation, epoch };
      const message = `incarnation ${first.incarnation} (epoch ${epoch}) is superseded by incarnation ${fence.incarnation} (epoch ${fence.epoch}), which has published no part yet`;
      return notReady(fence.incarnation, [{ kind: 'superseded', message, stale }]);
    }
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
        reason = `the gate threw: ${error instanceof Error ? error.message : String(error)}`;
      }
      if (reason !== undefined)
        failures.push({ kind: 'gate', gate: gate.name, message: `gate ${gate.name} refused: ${reason}` });
    }
    if (failures.length > 0) return notReady(first.incarnation, failures);
    return { ready: true, workerId, incarnation: first.incarnation, epoch, worker: assembled.worker };
  }
}

const noParts: NotReadyReason = { kind: 'no-parts', message: 'no valid rank part is published' };

/**
 * The valid parts of the incarnation with the largest epoch, and that epoch. Publication replaces
 * incarnations in one fenced commit, so two incarnations meet here only if parts were written
 * around the fence; never mix them, and never let the older one win.
 */
function newestIncarnation(stored: readonly StoredPart[]): { parts: RankPart[]; epoch: number } | undefined {
  let newest: { incarnation: string; epoch: number } | undefined;
  for (const { part, epoch } of stored) {
    if (part !== undefined && (newest === undefined || epoch > newest.epoch))
      newest = { incarnation: part.incarnation, epoch };
  }
  if (newest === undefined) return undefined;
  const parts = stored.flatMap(({ part, epoch }) =>
    part !== undefined && epoch === newest.epoch && part.incarnation === newest.incarnation ? [part] : [],
  );
  return { parts, epoch: newest.epoch };
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

function checkWatchOptions(store: DiscoveryStore, options: WatchWorkerReadinessOptions): void {
  checkStore('store', store);
  checkOptionsObject('options', options);
  checkFunction('options.onChange', options.onChange);
  if (options.gates !== undefined)
    checkArray('options.gates', options.gates, (gate, option) => checkOptionsObject(option, gate));
  if (options.logger !== undefined)
    checkFunction('options.logger.warn', checkOptionsObject('options.logger', options.logger).warn);
  checkOptionalString('options.keyPrefix', options.keyPrefix);
}
