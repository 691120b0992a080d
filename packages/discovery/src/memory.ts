import { DiscoveryClosedError, DiscoveryLeaseError } from './errors.js';
import {
  checkCompactRevision,
  checkCompares,
  checkFromRevision,
  checkKey,
  checkLeaseId,
  checkListener,
  checkMethodOptions,
  checkPrefix,
  checkStoreOptions,
  checkTtl,
  compareKeys,
  encodeValue,
  failedCompare,
  type ResolvedWrite,
  resolveCommit,
  wholeOption,
} from './common.js';
import { type ChangeBatch, LocalWatchHub } from './local-watch.js';
import type {
  CommitOptions,
  DiscoveryEntry,
  DiscoveryEvent,
  DiscoveryOperation,
  DiscoverySnapshot,
  DiscoveryStore,
  DiscoveryValue,
  DiscoveryWatch,
  Lease,
  LeaseId,
  PutOptions,
  WatchListener,
  WatchOptions,
} from './types.js';

export interface MemoryDiscoveryOptions {
  /** How many revisions of history a watcher can resume from (default 10,000). */
  readonly historyRevisions?: number;
  /**
   * The clock leases expire by, in milliseconds (default `performance.now`, monotonic). Expiry is
   * checked at every operation and by a timer armed for the earliest deadline, so with a clock of
   * your own, advance it and touch the store (any operation) to expire the leases it passed.
   */
  readonly now?: () => number;
}

/** The longest delay `setTimeout` waits (a longer one fires after 1 ms); a farther deadline is re-armed on the way. */
const maxTimerDelayMs = 2 ** 31 - 1;

interface MemoryLease {
  readonly ttlMs: number;
  readonly keys: Set<string>;
  expiresAt: number;
}

/** Discovery inside one process: a sorted-on-read map, leases with deadlines, a bounded change history. */
export class MemoryDiscoveryStore implements DiscoveryStore {
  readonly backend = 'memory';
  private readonly entries = new Map<string, DiscoveryEntry>();
  private readonly leases = new Map<LeaseId, MemoryLease>();
  private readonly history: ChangeBatch[] = [];
  private readonly historyRevisions: number;
  private readonly hub: LocalWatchHub;
  private revision = 0;
  private compactedRevision = 0;
  private readonly now: () => number;
  private expiryTimer: NodeJS.Timeout | undefined;
  private armedDeadline = Number.POSITIVE_INFINITY;
  private nextLease = 1;
  private closed = false;

  constructor(options: MemoryDiscoveryOptions = {}) {
    checkStoreOptions(this.backend, options);
    this.now = options.now ?? (() => performance.now());
    this.historyRevisions = wholeOption(this.backend, 'historyRevisions', options.historyRevisions, 10_000);
    this.hub = new LocalWatchHub({
      currentRevision: () => this.revision,
      batchesFrom: (from) =>
        from <= this.compactedRevision ? undefined : this.history.filter((batch) => batch.revision >= from),
      snapshot: (prefix) => this.snapshot(prefix),
    });
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    this.assertOpen('grantLease');
    checkTtl(this.backend, ttlMs);
    const id = String(this.nextLease++);
    this.leases.set(id, { ttlMs, keys: new Set(), expiresAt: this.now() + ttlMs });
    this.armExpiry();
    return { id, ttlMs };
  }

  async keepAlive(lease: LeaseId): Promise<void> {
    this.assertOpen('keepAlive');
    const held = this.leases.get(checkLeaseId(this.backend, lease));
    if (held === undefined) throw new DiscoveryLeaseError(this.backend, lease);
    held.expiresAt = this.now() + held.ttlMs;
  }

  async revokeLease(lease: LeaseId): Promise<void> {
    this.assertOpen('revokeLease');
    this.dropLease(checkLeaseId(this.backend, lease));
  }

  async put(key: string, value: DiscoveryValue, options: PutOptions = {}): Promise<number> {
    this.assertOpen('put');
    checkKey(this.backend, key);
    checkMethodOptions(this.backend, 'put', options);
    const lease = options.lease === undefined ? undefined : checkLeaseId(this.backend, options.lease);
    return this.apply(new Map([[key, { type: 'put', value: encodeValue(this.backend, key, value), lease }]]));
  }

  async get(key: string): Promise<DiscoveryEntry | undefined> {
    this.assertOpen('get');
    return this.entries.get(checkKey(this.backend, key));
  }

  async list(prefix: string): Promise<DiscoverySnapshot> {
    this.assertOpen('list');
    return this.snapshot(checkPrefix(this.backend, prefix));
  }

  async delete(key: string): Promise<boolean> {
    this.assertOpen('delete');
    if (!this.entries.has(checkKey(this.backend, key))) return false;
    this.apply(new Map([[key, { type: 'delete' }]]));
    return true;
  }

  async commit(operations: readonly DiscoveryOperation[], options?: CommitOptions): Promise<number> {
    this.assertOpen('commit');
    const compares = checkCompares(this.backend, options);
    const writes = resolveCommit(
      this.backend,
      operations,
      (prefix) => [...this.entries.keys()].filter((key) => key.startsWith(prefix)),
      (key) => this.entries.has(key),
    );
    const refused = failedCompare(this.backend, compares, (key) => this.entries.get(key)?.modRevision ?? 0);
    if (refused !== undefined) throw refused;
    return writes.size === 0 ? this.revision : this.apply(writes);
  }

  async compact(revision: number): Promise<void> {
    this.assertOpen('compact');
    this.forgetBefore(checkCompactRevision(this.backend, revision, this.revision));
  }

  async watch(prefix: string, listener: WatchListener, options: WatchOptions = {}): Promise<DiscoveryWatch> {
    this.assertOpen('watch');
    checkListener(this.backend, listener);
    checkMethodOptions(this.backend, 'watch', options);
    return this.hub.add(
      checkPrefix(this.backend, prefix),
      listener,
      checkFromRevision(this.backend, options.fromRevision),
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.expiryTimer);
    this.leases.clear();
    this.hub.closeAll();
  }

  private snapshot(prefix: string): DiscoverySnapshot {
    const entries = [...this.entries.values()]
      .filter((entry) => entry.key.startsWith(prefix))
      .sort((a, b) => compareKeys(a.key, b.key));
    return { entries, revision: this.revision };
  }

  /** Applies writes as one revision, keeps lease membership, records and publishes the batch. */
  private apply(writes: ReadonlyMap<string, ResolvedWrite>): number {
    for (const [key, write] of writes) {
      if (write.type === 'put' && write.lease !== undefined && !this.leases.has(write.lease)) {
        throw new DiscoveryLeaseError(this.backend, write.lease, key);
      }
    }
    const revision = ++this.revision;
    const events: DiscoveryEvent[] = [];
    for (const [key, write] of writes) {
      const previous = this.entries.get(key);
      if (previous?.lease !== undefined) this.leases.get(previous.lease)?.keys.delete(key);
      if (write.type === 'delete') {
        this.entries.delete(key);
        events.push({ type: 'delete', key, revision });
        continue;
      }
      const entry: DiscoveryEntry = {
        key,
        value: write.value,
        createRevision: previous?.createRevision ?? revision,
        modRevision: revision,
        lease: write.lease,
      };
      this.entries.set(key, entry);
      if (write.lease !== undefined) this.leases.get(write.lease)?.keys.add(key);
      events.push({ type: 'put', entry });
    }
    const batch = { revision, events };
    this.history.push(batch);
    this.forgetBefore(revision + 1 - this.historyRevisions);
    this.hub.publish([batch]);
    return revision;
  }

  private forgetBefore(revision: number): void {
    if (revision <= this.compactedRevision + 1) return;
    this.compactedRevision = revision - 1;
    const kept = this.history.findIndex((batch) => batch.revision >= revision);
    this.history.splice(0, kept === -1 ? this.history.length : kept);
  }

  /** Drops every lease whose deadline the clock passed, then re-arms the timer for the earliest one left. */
  private sweepExpired(): void {
    const now = this.now();
    for (const [id, lease] of this.leases) if (lease.expiresAt <= now) this.dropLease(id);
    this.armExpiry();
  }

  /** Keeps one timer armed for the earliest deadline (re-armed only when that deadline changed). */
  private armExpiry(): void {
    let earliest = Number.POSITIVE_INFINITY;
    for (const lease of this.leases.values()) earliest = Math.min(earliest, lease.expiresAt);
    if (earliest === this.armedDeadline && this.expiryTimer !== undefined) return;
    clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
    this.armedDeadline = earliest;
    if (earliest === Number.POSITIVE_INFINITY) return;
    this.expiryTimer = setTimeout(
      () => {
        this.expiryTimer = undefined;
        this.sweepExpired();
      },
      Math.min(maxTimerDelayMs, Math.max(0, earliest - this.now())),
    ).unref();
  }

  private dropLease(lease: LeaseId): void {
    const held = this.leases.get(lease);
    if (held === undefined) return;
    this.leases.delete(lease);
    if (held.keys.size > 0) this.apply(new Map([...held.keys].map((key) => [key, { type: 'delete' }] as const)));
  }

  /** Refuses an operation after close; otherwise first expires the leases the clock passed. */
  private assertOpen(operation: string): void {
    if (this.closed) throw new DiscoveryClosedError(this.backend, operation);
    this.sweepExpired();
  }
}
