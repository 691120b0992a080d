import { assembleWorker, type RankId, type RankPart, type Worker } from '@kvreuse/descriptors';
import type { DiscoveryEntry, DiscoveryStore, DiscoveryWatch, WatchNotice } from '../discovery/types.js';
import type { RankPartRefusedError } from '../errors.js';
import type { ReadinessGate } from './gate.js';
import { workerPartsPrefix } from './rank-part-keys.js';
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
  | { readonly kind: 'discovery-outage'; readonly message: string };

/** A `vram` bank of a published rank part: the rank and the bank's index in its part. */
export interface VramBank {
  readonly rank: RankId;
  readonly index: number;
}

export type WorkerReadiness =
  | { readonly ready: true; readonly workerId: string; readonly incarnation: string; readonly worker: Worker }
  | { readonly ready: false; readonly workerId: string; readonly incarnation: string | undefined; readonly reasons: readonly NotReadyReason[] };

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
  readonly part: RankPart | undefined;
}

/** What the tracker knew after one notice. */
interface ObservedState {
  readonly parts: readonly StoredPart[];
  readonly outage: string | undefined;
}

/**
 * Follows one worker's rank parts in discovery and reports its readiness: ready only when the
 * valid parts of its newest incarnation assemble into a complete worker (every rank exactly once,
 * consistent — a part exists only after its rank registered) and every gate passes. GPU memory fails
 * closed: a worker with any `vram` bank is ready only if `admissionGate` is installed and passes. A lease that
 * expires, a withdrawn part, a failing gate or a discovery outage withdraws readiness. Parts are
 * validated like any input; a refused part is logged once and ignored.
 */
export async function watchWorkerReadiness(
  store: DiscoveryStore,
  workerId: string,
  options: WatchWorkerReadinessOptions,
): Promise<WorkerReadinessWatch> {
  const tracker = new ReadinessTracker(store, workerId, options);
  await tracker.start();
  return tracker;
}

class ReadinessTracker implements WorkerReadinessWatch {
  readonly #store: DiscoveryStore;
  readonly #workerId: string;
  readonly #prefix: string;
  readonly #options: WatchWorkerReadinessOptions;
  readonly #parts = new Map<string, StoredPart>();
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
    this.#prefix = workerPartsPrefix(workerId, options.keyPrefix);
    this.#options = options;
    this.#current = { ready: false, workerId, incarnation: undefined, reasons: [noParts] };
  }

  get current(): WorkerReadiness {
    return this.#current;
  }

  async start(): Promise<void> {
    const snapshot = await this.#store.list(this.#prefix);
    this.#replace(snapshot.entries);
    this.#watch = await this.#store.watch(this.#prefix, (notice) => this.#onNotice(notice), { fromRevision: snapshot.revision + 1 });
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
    for (const entry of entries) {
      const known = previous.get(entry.key);
      if (known !== undefined && known.modRevision === entry.modRevision) this.#parts.set(entry.key, known);
      else this.#record(entry);
    }
  }

  /** Validates a stored part once per write; a refused one is logged and kept only as "present but refused". */
  #record(entry: DiscoveryEntry): void {
    const decoded = safeDecodeRankPartRecord(entry.key, entry.value, this.#options.keyPrefix);
    if (!decoded.success) this.#logRefusal(decoded.error);
    this.#parts.set(entry.key, { modRevision: entry.modRevision, part: decoded.success ? decoded.data : undefined });
  }

  #logRefusal(error: RankPartRefusedError): void {
    (this.#options.logger ?? console).warn(`kvreuse registry: worker ${this.#workerId}: ${error.message}; it does not count towards readiness`);
  }

  /** Queues an evaluation of the state as it is now, so that every state is judged and reported in order. */
  #schedule(): void {
    const state: ObservedState = { parts: [...this.#parts.values()], outage: this.#outage };
    this.#queue = this.#queue
      .then(() => this.#evaluate(state))
      .catch((error: unknown) => {
        (this.#options.logger ?? console).warn(`kvreuse registry: worker ${this.#workerId}: a readiness listener threw: ${String(error)}`);
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

  async #compute({ parts: stored, outage }: ObservedState): Promise<WorkerReadiness> {
    const workerId = this.#workerId;
    const notReady = (incarnation: string | undefined, reasons: NotReadyReason[]): WorkerReadiness => ({ ready: false, workerId, incarnation, reasons });
    if (outage !== undefined) {
      return notReady(undefined, [{ kind: 'discovery-outage', message: `discovery is unreachable: ${outage}` }]);
    }
    const parts = newestIncarnation(stored);
    const first = parts[0];
    if (first === undefined) return notReady(undefined, [noParts]);
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
      if (reason !== undefined) failures.push({ kind: 'gate', gate: gate.name, message: `gate ${gate.name} refused: ${reason}` });
    }
    if (failures.length > 0) return notReady(first.incarnation, failures);
    return { ready: true, workerId, incarnation: first.incarnation, worker: assembled.worker };
  }
}

const noParts: NotReadyReason = { kind: 'no-parts', message: 'no valid rank part is published' };

/**
 * The valid parts of the incarnation written most recently. Publication replaces incarnations in one
 * commit, so two incarnations only meet here if an old process wrote after a new one; never mix them.
 */
function newestIncarnation(stored: readonly StoredPart[]): RankPart[] {
  let newest: { incarnation: string; modRevision: number } | undefined;
  for (const { part, modRevision } of stored) {
    if (part !== undefined && (newest === undefined || modRevision > newest.modRevision)) newest = { incarnation: part.incarnation, modRevision };
  }
  return stored.flatMap(({ part }) => (part !== undefined && part.incarnation === newest?.incarnation ? [part] : []));
}

function vramBanksOf(worker: Worker): VramBank[] {
  return worker.ranks.flatMap((part) =>
    part.banks.flatMap((bank, index) => (bank.memKind === 'vram' ? [{ rank: { tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank }, index }] : [])),
  );
}

function describeIncomplete(result: Extract<ReturnType<typeof assembleWorker>, { complete: false }>): string {
  const rank = (r: RankId): string => `(tp ${r.tpRank}, pp ${r.ppRank})`;
  return [
    result.missing.length > 0 ? `missing ranks ${result.missing.map(rank).join(', ')}` : undefined,
    result.duplicates.length > 0 ? `duplicate ranks ${result.duplicates.map((d) => rank(d.rank)).join(', ')}` : undefined,
    result.conflicts.length > 0 ? `inconsistent ${result.conflicts.map((c) => `${c.field} of rank ${rank(c.rank)}`).join(', ')}` : undefined,
  ]
    .filter((text) => text !== undefined)
    .join('; ');
}

function signatureOf(readiness: WorkerReadiness): string {
  return readiness.ready
    ? `ready ${readiness.incarnation} ${readiness.worker.ranks.map((part) => part.transport.generation).join(',')}`
    : `not ready ${readiness.incarnation ?? ''} ${readiness.reasons.map((reason) => reason.message).join(' | ')}`;
}
