import { ExponentialBackoff, noop } from 'cockatiel';
import { Etcd3, EtcdLeaseInvalidError, type IKeyValue, type IWatchResponse, Range, type Watcher } from 'etcd3';
import {
  DiscoveryArgumentError,
  DiscoveryClosedError,
  DiscoveryLeaseError,
  DiscoveryUnavailableError,
  RegistryError,
} from '../errors.js';
import {
  checkCompactRevision,
  checkCompares,
  checkFromRevision,
  checkKey,
  checkLeaseId,
  checkPrefix,
  checkTtl,
  encodeValue,
  failedCompare,
  keyBytes,
  notifyListener,
  prefixEnd,
  type ResolvedWrite,
  resolveCommit,
  wholeOption,
} from './common.js';
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
  WatchNotice,
  WatchOptions,
} from './types.js';

export interface EtcdDiscoveryOptions {
  /** etcd client URLs, e.g. `http://127.0.0.1:2379`. */
  readonly hosts: string | readonly string[];
  /** Deadline of one request (default 5,000 ms). */
  readonly requestTimeoutMs?: number;
  /** Longest wait between two attempts to re-establish a lost watch (default 2,000 ms). */
  readonly maxReconnectDelayMs?: number;
  /** How often a commit re-reads and retries when a concurrent writer changed its prefix (default 16). */
  readonly commitAttempts?: number;
}

const backend = 'etcd';

const toEntry = (kv: IKeyValue): DiscoveryEntry => ({
  key: kv.key.toString('utf8'),
  value: new Uint8Array(kv.value.buffer, kv.value.byteOffset, kv.value.byteLength),
  createRevision: Number(kv.create_revision),
  modRevision: Number(kv.mod_revision),
  lease: kv.lease === '0' ? undefined : kv.lease,
});

/** The lease a commit's puts use (named when etcd refuses it). */
function leaseOf(writes: ReadonlyMap<string, ResolvedWrite>): LeaseId | undefined {
  for (const write of writes.values()) if (write.type === 'put' && write.lease !== undefined) return write.lease;
  return undefined;
}

/** The byte range of a prefix, in etcd's terms ('' is every key). */
function prefixRange(prefix: string): { key: Buffer; range_end: Buffer } {
  const key = prefix === '' ? Buffer.from([0]) : keyBytes(prefix);
  const end = prefix === '' ? Buffer.alloc(0) : prefixEnd(key);
  return { key, range_end: end.length === 0 ? Buffer.from([0]) : end };
}

/**
 * Discovery over etcd ≥ 3.4 (the etcd3 client): native leases, revisions, watches and transactions.
 * The client's own retries and circuit breaker are off: a failed request surfaces at once as
 * `DiscoveryUnavailableError`, and watches report outages and resume (or resync) themselves.
 */
export class EtcdDiscoveryStore implements DiscoveryStore {
  readonly backend = backend;
  private readonly client: Etcd3;
  private readonly requestTimeoutMs: number;
  private readonly maxReconnectDelayMs: number;
  private readonly commitAttempts: number;
  private readonly watches = new Set<EtcdWatch>();
  private closed = false;

  constructor(options: EtcdDiscoveryOptions) {
    this.requestTimeoutMs = wholeOption(backend, 'requestTimeoutMs', options.requestTimeoutMs, 5_000);
    this.maxReconnectDelayMs = wholeOption(backend, 'maxReconnectDelayMs', options.maxReconnectDelayMs, 2_000);
    this.commitAttempts = wholeOption(backend, 'commitAttempts', options.commitAttempts, 16);
    const hosts = typeof options.hosts === 'string' ? [options.hosts] : options.hosts;
    if (!Array.isArray(hosts) || hosts.length === 0 || hosts.some((host) => typeof host !== 'string' || !/^https?:\/\/./.test(host))) {
      throw new DiscoveryArgumentError(backend, 'hosts', options.hosts, 'hosts are one or more http(s):// client URLs');
    }
    this.client = new Etcd3({
      hosts: [...hosts],
      grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 1_000 },
      faultHandling: {
        host: () => noop,
        global: noop,
        watchBackoff: new ExponentialBackoff({ initialDelay: 100, maxDelay: this.maxReconnectDelayMs }).next(),
      },
    });
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    checkTtl(backend, ttlMs);
    const granted = await this.call('grantLease', undefined, (deadline) =>
      this.client.leaseClient.leaseGrant({ TTL: Math.ceil(ttlMs / 1000), ID: 0 }, { deadline }),
    );
    return { id: granted.ID, ttlMs: Number(granted.TTL) * 1000 };
  }

  async keepAlive(lease: LeaseId): Promise<void> {
    checkLeaseId(backend, lease);
    const ttl = await this.call('keepAlive', undefined, async (deadline) => {
      const stream = await this.client.leaseClient.leaseKeepAlive({ deadline });
      try {
        const answer = new Promise<string>((resolve, reject) => {
          stream.on('data', (response: { TTL: string }) => resolve(response.TTL));
          stream.on('error', reject);
          stream.on('end', () => reject(new Error('keep-alive stream ended without an answer')));
        });
        stream.write({ ID: lease });
        return await answer;
      } finally {
        stream.end();
      }
    });
    if (Number(ttl) <= 0) throw new DiscoveryLeaseError(backend, lease);
  }

  async revokeLease(lease: LeaseId): Promise<void> {
    checkLeaseId(backend, lease);
    try {
      await this.call('revokeLease', undefined, (deadline) =>
        this.client.leaseClient.leaseRevoke({ ID: lease }, { deadline }),
      );
    } catch (error) {
      if (!(error instanceof DiscoveryLeaseError)) throw error;
    }
  }

  async put(key: string, value: DiscoveryValue, options: PutOptions = {}): Promise<number> {
    checkKey(backend, key);
    const bytes = Buffer.from(encodeValue(backend, key, value));
    const lease = options.lease === undefined ? undefined : checkLeaseId(backend, options.lease);
    const response = await this.call(
      'put',
      key,
      (deadline) => this.client.kv.put({ key: keyBytes(key), value: bytes, lease: lease ?? 0 }, { deadline }),
      lease,
    );
    return Number(response.header.revision);
  }

  async get(key: string): Promise<DiscoveryEntry | undefined> {
    checkKey(backend, key);
    const response = await this.call('get', key, (deadline) => this.client.kv.range({ key: keyBytes(key) }, { deadline }));
    const kv = response.kvs[0];
    return kv === undefined ? undefined : toEntry(kv);
  }

  async list(prefix: string): Promise<DiscoverySnapshot> {
    checkPrefix(backend, prefix);
    const response = await this.call('list', prefix, (deadline) =>
      this.client.kv.range({ ...prefixRange(prefix), sort_target: 'Key', sort_order: 'Ascend' }, { deadline }),
    );
    return { entries: response.kvs.map(toEntry), revision: Number(response.header.revision) };
  }

  async delete(key: string): Promise<boolean> {
    checkKey(backend, key);
    const response = await this.call('delete', key, (deadline) =>
      this.client.kv.deleteRange({ key: keyBytes(key) }, { deadline }),
    );
    return Number(response.deleted) > 0;
  }

  /**
   * etcd refuses a transaction that deletes a range and puts a key inside it, so a commit reads the
   * ranges its `deletePrefix` operations cover, folds the operations into one write per key, and
   * commits them on the condition that nothing under those ranges changed since the read; if
   * something did, it reads again (at most `commitAttempts` times). The caller's `compare`
   * conditions go into the same transaction; when it fails, its failure branch reads the compared
   * keys, so that a failed condition is reported (and not retried) and a changed range is retried.
   */
  async commit(operations: readonly DiscoveryOperation[], options?: CommitOptions): Promise<number> {
    resolveCommit(backend, operations, () => [], () => true);
    const compares = checkCompares(backend, options);
    const prefixes = [
      ...new Set(operations.flatMap((operation) => (operation.type === 'deletePrefix' ? [operation.prefix] : []))),
    ];
    for (let attempt = 0; attempt < this.commitAttempts; attempt++) {
      const read = await Promise.all(prefixes.map((prefix) => this.list(prefix)));
      const readRevision = Math.max(0, ...read.map((snapshot) => snapshot.revision));
      const existing = new Map(prefixes.map((prefix, i) => [prefix, read[i]!.entries.map((entry) => entry.key)]));
      const writes = resolveCommit(backend, operations, (prefix) => existing.get(prefix) ?? [], () => true);
      const response = await this.call('commit', undefined, (deadline) =>
        this.client.kv.txn(
          {
            compare: [
              ...prefixes.map((prefix) => ({
                ...prefixRange(prefix),
                target: 'Mod' as const,
                result: 'Less' as const,
                mod_revision: String(readRevision + 1),
              })),
              ...compares.map(({ key, modRevision }) => ({
                key: keyBytes(key),
                target: 'Mod' as const,
                result: 'Equal' as const,
                mod_revision: String(modRevision),
              })),
            ],
            success: [...writes].map(([key, write]) =>
              write.type === 'put'
                ? { request_put: { key: keyBytes(key), value: Buffer.from(write.value), lease: write.lease ?? 0 } }
                : { request_delete_range: { key: keyBytes(key) } },
            ),
            failure: compares.map(({ key }) => ({ request_range: { key: keyBytes(key) } })),
          },
          { deadline },
        ),
        leaseOf(writes),
      );
      if (response.succeeded) return Number(response.header.revision);
      const current = new Map(
        compares.map(({ key }, i) => [key, Number(response.responses[i]?.response_range.kvs[0]?.mod_revision ?? 0)]),
      );
      const refused = failedCompare(backend, compares, (key) => current.get(key) ?? 0);
      if (refused !== undefined) throw refused;
    }
    throw new DiscoveryUnavailableError(backend, `commit (${this.commitAttempts} attempts lost to concurrent writers)`, prefixes[0]);
  }

  async compact(revision: number): Promise<void> {
    const current = await this.call('compact', undefined, (deadline) =>
      this.client.kv.range({ key: Buffer.from([0]), count_only: true }, { deadline }),
    );
    checkCompactRevision(backend, revision, Number(current.header.revision));
    await this.call('compact', undefined, (deadline) =>
      this.client.kv.compact({ revision: String(revision), physical: true }, { deadline }),
    );
  }

  async watch(prefix: string, listener: WatchListener, options: WatchOptions = {}): Promise<DiscoveryWatch> {
    checkPrefix(backend, prefix);
    let fromRevision = checkFromRevision(backend, options.fromRevision);
    if (fromRevision === undefined) {
      const current = await this.call('watch', prefix, (deadline) =>
        this.client.kv.range({ ...prefixRange(prefix), count_only: true }, { deadline }),
      );
      fromRevision = Number(current.header.revision) + 1;
    }
    const watch = new EtcdWatch(this, prefix, listener, fromRevision - 1, this.maxReconnectDelayMs, (w) =>
      this.watches.delete(w),
    );
    this.watches.add(watch);
    try {
      await watch.start();
    } catch (error) {
      await watch.close();
      throw new DiscoveryUnavailableError(backend, 'watch', prefix, { cause: error });
    }
    return watch;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.watches].map((watch) => watch.close()));
    this.client.close();
  }

  /** @internal A raw etcd3 watcher over a prefix, starting at a revision. */
  rawWatcher(prefix: string, startRevision: number): Watcher {
    const range = prefixRange(prefix);
    return this.client
      .watch()
      .inRange(new Range(range.key, range.range_end))
      .startRevision(String(startRevision))
      .watcher();
  }

  /** Runs one request with a deadline; maps etcd3 failures to the package's typed errors. */
  async call<T>(
    operation: string,
    key: string | undefined,
    request: (deadline: Date) => Promise<T>,
    lease?: LeaseId,
  ): Promise<T> {
    if (this.closed) throw new DiscoveryClosedError(backend, operation);
    try {
      return await request(new Date(Date.now() + this.requestTimeoutMs));
    } catch (error) {
      if (error instanceof RegistryError) throw error;
      if (error instanceof EtcdLeaseInvalidError) throw new DiscoveryLeaseError(backend, lease ?? 'unknown', key);
      if (error instanceof Error && /too many operations in txn/.test(error.message)) {
        throw new DiscoveryArgumentError(backend, 'operations', operation, `etcd refused the transaction: ${error.message}`);
      }
      throw new DiscoveryUnavailableError(backend, operation, key, { cause: error });
    }
  }
}

/**
 * One watch over etcd. It tracks the last revision it delivered itself: when the stream is lost
 * it reports an outage, drops the etcd3 watcher (whose own resumption revision can skip history)
 * and re-creates one from its own revision + 1 until etcd answers; if etcd cancels the watch
 * (history compacted) it lists the prefix and hands the listener a resync.
 */
class EtcdWatch implements DiscoveryWatch {
  private inner: Watcher | undefined;
  private outage = false;
  private started = false;
  private closed = false;
  private reconnectDelayMs = 100;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: EtcdDiscoveryStore,
    readonly prefix: string,
    private readonly listener: WatchListener,
    public revision: number,
    private readonly maxReconnectDelayMs: number,
    private readonly onClose: (watch: EtcdWatch) => void,
  ) {}

  /** Resolves when etcd accepted the first watcher; rejects if it could not be reached. */
  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const watcher = this.attach();
      watcher.once('connected', () => {
        this.started = true;
        resolve();
      });
      watcher.once('disconnected', (error: Error) => reject(error));
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.onClose(this);
    await this.detach();
  }

  private attach(): Watcher {
    const watcher = this.store.rawWatcher(this.prefix, this.revision + 1);
    this.inner = watcher;
    watcher.on('connected', () => {
      if (watcher !== this.inner || !this.outage) return;
      this.outage = false;
      this.reconnectDelayMs = 100;
      this.notify({ type: 'restored' });
    });
    watcher.on('data', (response: IWatchResponse) => {
      if (watcher === this.inner) this.deliver(response);
    });
    watcher.on('disconnected', (error: Error) => {
      if (watcher === this.inner && this.started) this.lost(error);
    });
    watcher.on('error', (error: Error) => {
      if (watcher === this.inner) void this.resync(error);
    });
    return watcher;
  }

  /** Drops the current etcd3 watcher; one that etcd cancelled itself needs no cancel request. */
  private async detach(cancelledByEtcd = false): Promise<void> {
    const watcher = this.inner;
    this.inner = undefined;
    if (watcher === undefined || cancelledByEtcd) return;
    try {
      await watcher.cancel();
    } catch {
      // The stream is gone already; nothing is left to cancel.
    }
  }

  private deliver(response: IWatchResponse): void {
    let batch: { revision: number; events: DiscoveryEvent[] } | undefined;
    const flush = () => {
      if (batch !== undefined) this.notify({ type: 'changes', ...batch });
      batch = undefined;
    };
    // Events already delivered (a replay after re-attaching) are skipped; one revision never
    // spans two responses, since fragmentation is off.
    const delivered = this.revision;
    for (const event of response.events) {
      const revision = Number(event.kv.mod_revision);
      if (revision <= delivered) continue;
      if (batch !== undefined && batch.revision !== revision) flush();
      batch ??= { revision, events: [] };
      batch.events.push(
        event.type === 'Delete'
          ? { type: 'delete', key: event.kv.key.toString('utf8'), revision }
          : { type: 'put', entry: toEntry(event.kv) },
      );
      this.revision = revision;
    }
    flush();
  }

  private lost(error: Error): void {
    void this.detach();
    if (!this.outage) {
      this.outage = true;
      this.notify({
        type: 'outage',
        error: new DiscoveryUnavailableError(backend, `watch of ${JSON.stringify(this.prefix)}`, undefined, {
          cause: error,
        }),
      });
    }
    this.scheduleReattach();
  }

  private scheduleReattach(): void {
    if (this.closed) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      if (!this.closed) this.attach();
    }, this.reconnectDelayMs);
    this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, this.maxReconnectDelayMs);
  }

  /** etcd cancelled the watch (its start revision was compacted): hand over the current state. */
  private async resync(error: Error): Promise<void> {
    await this.detach(true);
    if (this.closed) return;
    try {
      const snapshot = await this.store.list(this.prefix);
      if (this.closed) return;
      this.revision = snapshot.revision;
      this.notify({ type: 'resync', reason: error.message, snapshot });
      this.attach();
    } catch (listError) {
      this.lost(listError instanceof Error ? listError : error);
    }
  }

  private notify(notice: WatchNotice): void {
    notifyListener(this.listener, notice);
  }
}

export function connectEtcdDiscovery(options: EtcdDiscoveryOptions): EtcdDiscoveryStore {
  return new EtcdDiscoveryStore(options);
}
