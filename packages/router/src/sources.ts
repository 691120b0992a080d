import { checkCompatibility, type Worker } from '@kvreuse/descriptors';
import { type WorkerReadiness } from '@kvreuse/discovery';
import { RetainedInventory } from '@kvreuse/inventory';
import { PullNotStartedError, RouterOptionError } from './errors.js';

/** How far the bytes travel between a source and the destination. */
export type LinkClass = 'same-host' | 'network';
export const linkClasses: readonly LinkClass[] = ['same-host', 'network'];

/** How a source hashes its blocks, when it says so (for instance from its deployment profile). */
export interface DeclaredBlockHash {
  readonly function: string;
  readonly seed: string;
}

export type SourceHealth = { readonly healthy: true } | { readonly healthy: false; readonly reason: string };

export interface ObserveOptions {
  /** The machine the worker runs on; sources on the destination's machine are `same-host`, others (or unknown) `network`. */
  readonly host?: string;
  /** The block hash function and seed the worker declares, checked against the router's own. */
  readonly blockHash?: DeclaredBlockHash;
}

/** What the router knows about one ready worker incarnation. */
export interface SourceState {
  readonly workerId: string;
  readonly incarnation: string;
  readonly epoch: number;
  readonly worker: Worker;
  readonly host: string | undefined;
  readonly blockHash: DeclaredBlockHash | undefined;
  /**
   * True until the incarnation has published its complete inventory: its batches say so in the followed
   * inventory (`SourceBookOptions.inventory`), or `inventoryComplete` was called.
   */
  readonly warming: boolean;
  readonly health: SourceHealth;
  /** Pulls from this incarnation started and not yet ended. */
  readonly activePulls: number;
}

type MutableSource = { -readonly [Key in keyof SourceState]: SourceState[Key] };

interface Entry {
  /** The ready incarnation, or undefined while the worker is not ready. */
  source: MutableSource | undefined;
  /** The largest epoch seen: an older incarnation never comes back. */
  epoch: number;
  /**
   * The last incarnations seen ready (at most `rememberedReadyIncarnations`, oldest first): a not-ready
   * report naming another one is about a newer one.
   */
  readyIncarnations: Set<string>;
  /**
   * Compatibility verdicts of the ready incarnation, by destination incarnation, least recently asked
   * first (at most `rememberedVerdicts`).
   */
  compatibility: Map<string, string | undefined>;
  /** The destination descriptor last asked about, and its verdict: most decisions ask about the same one. */
  lastDestination: Worker | undefined;
  lastVerdict: string | undefined;
}

const healthy: SourceHealth = Object.freeze({ healthy: true });

/**
 * The ready incarnation and the three before it: a report about an older one would come from a watch
 * lagging several restarts behind. Taken for a newer incarnation's, it only withdraws the ready one.
 */
const rememberedReadyIncarnations = 4;

/**
 * Verdicts kept per source: more than the destinations one router sends a source's blocks to, so that
 * only superseded destination incarnations (each restart is a new one) fall off; recomputing a verdict
 * is one `checkCompatibility` call.
 */
const rememberedVerdicts = 256;

export interface SourceBookOptions {
  /**
   * The inventory followed from discovery (`followInventory`): a source stops warming by itself once
   * its incarnation's batches say its inventory is complete (`RetainedInventory.completeEpoch`).
   */
  readonly inventory?: RetainedInventory;
}

/**
 * The router's view of the workers that may serve a pull: which incarnation of each is ready (from
 * `watchWorkerReadiness`), whether it is still warming (it (re)joined and has not yet published its
 * complete inventory), its health and how many pulls it is serving. Fed by the caller; read by `decide`.
 * A new incarnation (a larger epoch) replaces everything known of the previous one and starts warming;
 * an older incarnation is ignored.
 */
export class SourceBook {
  private readonly entries = new Map<string, Entry>();
  /** The epoch whose complete inventory each worker last announced. */
  private readonly completed = new Map<string, number>();
  private readonly inventory: RetainedInventory | undefined;

  constructor(options: SourceBookOptions = {}) {
    if (options === null || typeof options !== 'object') throw new RouterOptionError('options', options, 'an object');
    if (options.inventory !== undefined && !(options.inventory instanceof RetainedInventory)) {
      throw new RouterOptionError('options.inventory', options.inventory, 'a RetainedInventory of @kvreuse/inventory');
    }
    this.inventory = options.inventory;
  }

  /**
   * Takes a worker's readiness as `watchWorkerReadiness` reports it. Returns false when it is about an
   * incarnation older than one already seen (ignored). Throws `RouterOptionError`, taking in nothing, for
   * a ready one without its incarnation, its epoch (a whole number ≥ 1) or its worker descriptor.
   */
  observe(readiness: WorkerReadiness, options: ObserveOptions = {}): boolean {
    if (readiness === null || typeof readiness !== 'object' || typeof readiness.workerId !== 'string') {
      throw new RouterOptionError('readiness', readiness, 'a WorkerReadiness of @kvreuse/discovery');
    }
    if (options === null || typeof options !== 'object') throw new RouterOptionError('options', options, 'an object');
    const { host } = options;
    const blockHash = declaredBlockHash(options.blockHash);
    if (host !== undefined && typeof host !== 'string')
      throw new RouterOptionError('options.host', host, 'the machine the worker runs on, a string, or absent');
    if (readiness.ready) checkReady(readiness);
    const entry: Entry = this.entries.get(readiness.workerId) ?? {
      source: undefined,
      epoch: 0,
      readyIncarnations: new Set(),
      compatibility: new Map(),
      lastDestination: undefined,
      lastVerdict: undefined,
    };
    this.entries.set(readiness.workerId, entry);
    if (!readiness.ready) {
      // Not ready says nothing of its epoch: the ready incarnation stops serving, the fence stays.
      // A worker that comes back ready has (re)joined: it warms again until it announces its inventory.
      // A report naming an incarnation never seen ready is about the one that superseded the ready one
      // (it claimed the fence and is still coming up); one naming an older incarnation changes nothing.
      const incarnation = readiness.incarnation;
      if (
        incarnation === undefined ||
        incarnation === entry.source?.incarnation ||
        !entry.readyIncarnations.has(incarnation)
      ) {
        entry.source = undefined;
        this.completed.delete(readiness.workerId);
      }
      return true;
    }
    if (readiness.epoch < entry.epoch) return false;
    const current = entry.source;
    if (current !== undefined && readiness.epoch === current.epoch && readiness.incarnation === current.incarnation) {
      if (current.worker !== readiness.worker) forgetVerdicts(entry);
      current.worker = readiness.worker;
      current.host = host;
      current.blockHash = blockHash;
      return true;
    }
    forgetVerdicts(entry);
    entry.epoch = readiness.epoch;
    rememberReady(entry, readiness.incarnation);
    entry.source = {
      workerId: readiness.workerId,
      incarnation: readiness.incarnation,
      epoch: readiness.epoch,
      worker: readiness.worker,
      host,
      blockHash,
      warming: this.completed.get(readiness.workerId) !== readiness.epoch,
      health: healthy,
      activePulls: 0,
    };
    return true;
  }

  /**
   * The incarnation of this epoch has published its complete inventory: it stops warming. Said before
   * the incarnation is ready, it applies once it is. Returns false for an older incarnation's.
   */
  inventoryComplete(workerId: string, epoch: number): boolean {
    checkWorkerEpoch(workerId, epoch);
    const entry = this.entries.get(workerId);
    if (entry !== undefined && epoch < entry.epoch) return false;
    this.completed.set(workerId, epoch);
    if (entry?.source !== undefined && entry.source.epoch === epoch) entry.source.warming = false;
    return true;
  }

  /** The peer health of a worker's ready incarnation (healthy until said otherwise). Returns false if none is ready. */
  setHealth(workerId: string, health: SourceHealth): boolean {
    if (
      health === null ||
      typeof health !== 'object' ||
      typeof health.healthy !== 'boolean' ||
      (!health.healthy && (typeof health.reason !== 'string' || health.reason === ''))
    ) {
      throw new RouterOptionError(
        'health',
        health,
        '{ healthy: true } or { healthy: false, reason } with a reason in words',
      );
    }
    const source = this.entries.get(workerId)?.source;
    if (source === undefined) return false;
    source.health = health.healthy ? healthy : Object.freeze({ healthy: false, reason: health.reason });
    return true;
  }

  /**
   * A pull from the incarnation of this epoch started. Returns false (nothing counted) for an incarnation
   * that is not the ready one. Throws `RouterOptionError` for a worker id that is no string or an epoch
   * that is no whole number ≥ 1.
   */
  pullStarted(workerId: string, epoch: number): boolean {
    checkWorkerEpoch(workerId, epoch);
    const source = this.entries.get(workerId)?.source;
    if (source === undefined || source.epoch !== epoch) return false;
    source.activePulls++;
    return true;
  }

  /** A pull started with `pullStarted` ended. Returns false for an incarnation no longer ready (its count is gone with it); refuses what `pullStarted` refuses. */
  pullEnded(workerId: string, epoch: number): boolean {
    checkWorkerEpoch(workerId, epoch);
    const source = this.entries.get(workerId)?.source;
    if (source === undefined || source.epoch !== epoch) return false;
    if (source.activePulls === 0) throw new PullNotStartedError(workerId, epoch);
    source.activePulls--;
    return true;
  }

  /** The worker's ready incarnation, or undefined. */
  get(workerId: string): SourceState | undefined {
    const source = this.entries.get(workerId)?.source;
    if (source?.warming === true) this.warmUp(source);
    return source;
  }

  /** Every ready incarnation, by worker id. */
  ready(): SourceState[] {
    const sources = [...this.entries.values()].flatMap((entry) => (entry.source === undefined ? [] : [entry.source]));
    for (const source of sources) if (source.warming) this.warmUp(source);
    return sources.sort((a, b) => (a.workerId < b.workerId ? -1 : 1));
  }

  /** Ends a source's warming once the followed inventory says its incarnation's inventory is complete. */
  private warmUp(source: MutableSource): void {
    if (this.inventory === undefined || this.inventory.completeEpoch(source.workerId) !== source.epoch) return;
    this.completed.set(source.workerId, source.epoch);
    source.warming = false;
  }

  /**
   * Whether the ready incarnation's blocks can move to `destination`: undefined if they can, else why
   * not (`checkCompatibility` of @kvreuse/descriptors, in words). Remembered per destination
   * incarnation, for the 256 asked about last.
   */
  incompatibility(source: SourceState, destination: Worker): string | undefined {
    const entry = this.entries.get(source.workerId);
    const current = entry?.source === source ? entry : undefined;
    if (current !== undefined && current.lastDestination === destination) return current.lastVerdict;
    const key = `${destination.workerId}\u0000${destination.incarnation}`;
    let verdict: string | undefined;
    if (current !== undefined && current.compatibility.has(key)) verdict = current.compatibility.get(key);
    else {
      const result = checkCompatibility(source.worker, destination);
      verdict = result.ok ? undefined : result.reasons.map((reason) => reason.message).join('; ');
    }
    if (current !== undefined) {
      rememberVerdict(current.compatibility, key, verdict);
      current.lastDestination = destination;
      current.lastVerdict = verdict;
    }
    return verdict;
  }
}

function checkWorkerEpoch(workerId: string, epoch: number): void {
  if (typeof workerId !== 'string' || workerId === '')
    throw new RouterOptionError('workerId', workerId, 'a worker id, a non-empty string');
  if (!(Number.isSafeInteger(epoch) && epoch >= 1))
    throw new RouterOptionError('epoch', epoch, 'an epoch is a whole number ≥ 1');
}

/** Refuses a ready readiness that could not serve as a source: it would break the epoch fence, or `decide` later. */
function checkReady(readiness: Extract<WorkerReadiness, { ready: true }>): void {
  const { incarnation, epoch, worker } = readiness;
  if (typeof incarnation !== 'string')
    throw new RouterOptionError('readiness.incarnation', incarnation, 'the ready incarnation, a string');
  if (!(Number.isSafeInteger(epoch) && epoch >= 1))
    throw new RouterOptionError('readiness.epoch', epoch, 'an epoch is a whole number ≥ 1');
  if (
    worker === null ||
    typeof worker !== 'object' ||
    typeof worker.role !== 'string' ||
    !Array.isArray(worker.ranks)
  ) {
    throw new RouterOptionError(
      'readiness.worker',
      worker,
      'a complete worker descriptor (Worker of @kvreuse/descriptors)',
    );
  }
}

function declaredBlockHash(declared: DeclaredBlockHash | undefined): DeclaredBlockHash | undefined {
  if (declared === undefined) return undefined;
  if (
    declared === null ||
    typeof declared !== 'object' ||
    typeof declared.function !== 'string' ||
    typeof declared.seed !== 'string'
  ) {
    throw new RouterOptionError('options.blockHash', declared, '{ function, seed }, both strings, or absent');
  }
  return Object.freeze({ function: declared.function, seed: declared.seed });
}

function rememberReady(entry: Entry, incarnation: string): void {
  const remembered = entry.readyIncarnations;
  remembered.delete(incarnation);
  remembered.add(incarnation);
  for (const oldest of remembered) {
    if (remembered.size <= rememberedReadyIncarnations) break;
    remembered.delete(oldest);
  }
}

function rememberVerdict(verdicts: Map<string, string | undefined>, key: string, verdict: string | undefined): void {
  verdicts.delete(key);
  verdicts.set(key, verdict);
  for (const oldest of verdicts.keys()) {
    if (verdicts.size <= rememberedVerdicts) break;
    verdicts.delete(oldest);
  }
}

function forgetVerdicts(entry: Entry): void {
  entry.compatibility.clear();
  entry.lastDestination = undefined;
  entry.lastVerdict = undefined;
}

/** The link class between a source and the destination's host. */
export function linkClassOf(source: SourceState, destinationHost: string | undefined): LinkClass {
  return source.host !== undefined && source.host === destinationHost ? 'same-host' : 'network';
}

const publishedHosts = new WeakMap<Worker, string | null | undefined>();

/**
 * The machine a worker's rank parts name (rank part version 3 `host`): the host when every rank names
 * the same one, `null` when they name several (the worker spans machines), undefined when a rank names
 * none. Remembered per descriptor.
 */
export function publishedHost(worker: Worker): string | null | undefined {
  if (publishedHosts.has(worker)) return publishedHosts.get(worker);
  const hosts = new Set(worker.ranks.map((rank) => rank.host));
  const host = hosts.has(undefined) ? undefined : hosts.size === 1 ? ([...hosts][0] as string) : null;
  publishedHosts.set(worker, host);
  return host;
}

/**
 * The link class between a source and the destination, from the hosts their rank parts publish
 * (`publishedHost`): `same-host` when both run on one machine, `network` when they name different
 * machines or span several. When either names none, from the hosts the caller gave (`linkClassOf`).
 */
export function linkClassBetween(
  source: SourceState,
  destination: Worker,
  destinationHost: string | undefined,
): LinkClass {
  const from = publishedHost(source.worker);
  const to = publishedHost(destination);
  if (from === undefined || to === undefined) return linkClassOf(source, destinationHost);
  return from !== null && from === to ? 'same-host' : 'network';
}
