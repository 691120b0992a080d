import type { Etcd3, IDuplexStream, IKeyValue, IWatchRequest, IWatchResponse } from 'etcd3';
import { describeValue, redactCredentials } from '@kvreuse/errors';
import {
  DiscoveryArgumentError,
  DiscoveryClosedError,
  DiscoveryLeaseError,
  DiscoveryUnavailableError,
  DiscoveryError,
} from './errors.js';
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
  encodeValue,
  failedCompare,
  keyBytes,
  notifyListener,
  prefixEnd,
  type ResolvedWrite,
  resolveCommit,
  wholeOption,
} from './common.js';
import { etcd3, noRetries } from './drivers.js';
import { EtcdRefusals, type EtcdTlsFiles, type EtcdUser, tlsCredentials, userPassword } from './etcd-security.js';
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
  /**
   * Deadline of one request, and of etcd's confirmation of a new watch stream (default 5,000 ms, at least
   * 100 ms). A watch asks etcd for its progress this often and counts two requests unanswered as an outage.
   */
  readonly requestTimeoutMs?: number;
  /** Longest wait between two attempts to re-establish a lost watch (default 2,000 ms). */
  readonly maxReconnectDelayMs?: number;
  /** How often a commit re-reads and retries when a concurrent writer changed its prefix (default 16). */
  readonly commitAttempts?: number;
  /** Certificates for TLS (every host `https://`); without it, `https://` hosts trust the authorities Node.js trusts. */
  readonly tls?: EtcdTlsFiles;
  /** The user this client authenticates as, on a cluster with authentication enabled. */
  readonly auth?: EtcdUser;
}

const backend = 'etcd';

/** How long gRPC waits before its first reconnection to an endpoint. */
const initialReconnectBackoffMs = 100;

/**
 * The shortest `requestTimeoutMs`: the first reconnect back-off. A shorter deadline fails requests that one
 * reconnection delays, and a watch that asks for progress this often counts a loaded etcd's late answers as
 * an outage.
 */
const minRequestTimeoutMs = initialReconnectBackoffMs;

const toEntry = (kv: IKeyValue): DiscoveryEntry => ({
  key: kv.key.toString('utf8'),
  value: new Uint8Array(kv.value.buffer, kv.value.byteOffset, kv.value.byteLength),
  createRevision: Number(kv.create_revision),
  modRevision: Number(kv.mod_revision),
  lease: kv.lease === '0' ? undefined : kv.lease,
});

/** A commit's puts under a lease, in the commit's order. */
function leasedPuts(writes: ReadonlyMap<string, ResolvedWrite>): { key: string; lease: LeaseId }[] {
  return [...writes].flatMap(([key, write]) =>
    write.type === 'put' && write.lease !== undefined ? [{ key, lease: write.lease }] : [],
  );
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
  // Private (#) so that no rendering of the store (JSON.stringify, util.inspect) reaches the client's
  // options, which hold the user's password.
  readonly #client: Etcd3;
  private readonly requestTimeoutMs: number;
  private readonly maxReconnectDelayMs: number;
  private readonly commitAttempts: number;
  private readonly refusals: EtcdRefusals;
  private readonly hosts: readonly string[];
  private readonly watches = new Set<EtcdWatch>();
  private closed = false;

  constructor(options: EtcdDiscoveryOptions) {
    checkStoreOptions(backend, options);
    this.requestTimeoutMs = wholeOption(
      backend,
      'requestTimeoutMs',
      options.requestTimeoutMs,
      5_000,
      minRequestTimeoutMs,
    );
    this.maxReconnectDelayMs = wholeOption(backend, 'maxReconnectDelayMs', options.maxReconnectDelayMs, 2_000);
    this.commitAttempts = wholeOption(backend, 'commitAttempts', options.commitAttempts, 16);
    const hosts = typeof options.hosts === 'string' ? [options.hosts] : options.hosts;
    if (
      !Array.isArray(hosts) ||
      hosts.length === 0 ||
      hosts.some((host) => typeof host !== 'string' || !/^https?:\/\/./.test(host))
    ) {
      throw new DiscoveryArgumentError(backend, 'hosts', options.hosts, 'hosts are one or more http(s):// client URLs');
    }
    const withCredentials = hosts.find((host) => redactCredentials(host) !== host);
    if (withCredentials !== undefined) {
      throw new DiscoveryArgumentError(
        backend,
        'hosts',
        withCredentials,
        'a host URL carries no credentials: give the user in auth (its password in auth.passwordFile)',
      );
    }
    const user = options.auth === undefined ? undefined : userPassword(options.auth);
    this.hosts = [...hosts];
    this.refusals = new EtcdRefusals(hosts, user?.username);
    this.#client = new (etcd3().Etcd3)({
      hosts: [...hosts],
      grpcOptions: {
        'grpc.initial_reconnect_backoff_ms': initialReconnectBackoffMs,
        'grpc.max_reconnect_backoff_ms': 1_000,
      },
      faultHandling: { host: () => noRetries(), global: noRetries() },
      ...(options.tls === undefined ? {} : { credentials: tlsCredentials(options.tls, hosts) }),
      ...(user === undefined
        ? {}
        : { auth: { ...user, callOptions: () => ({ deadline: new Date(Date.now() + this.requestTimeoutMs) }) } }),
    });
  }

  async grantLease(ttlMs: number): Promise<Lease> {
    checkTtl(backend, ttlMs);
    const granted = await this.call('grantLease', undefined, (deadline) =>
      this.#client.leaseClient.leaseGrant({ TTL: Math.ceil(ttlMs / 1000), ID: 0 }, { deadline }),
    );
    return { id: granted.ID, ttlMs: Number(granted.TTL) * 1000 };
  }

  async keepAlive(lease: LeaseId): Promise<void> {
    checkLeaseId(backend, lease);
    const ttl = await this.call('keepAlive', undefined, async (deadline) => {
      const stream = await this.#client.leaseClient.leaseKeepAlive({ deadline });
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
        this.#client.leaseClient.leaseRevoke({ ID: lease }, { deadline }),
      );
    } catch (error) {
      if (!(error instanceof DiscoveryLeaseError)) throw error;
    }
  }

  async put(key: string, value: DiscoveryValue, options: PutOptions = {}): Promise<number> {
    checkKey(backend, key);
    checkMethodOptions(backend, 'put', options);
    const bytes = Buffer.from(encodeValue(backend, key, value));
    const lease = options.lease === undefined ? undefined : checkLeaseId(backend, options.lease);
    const response = await this.call(
      'put',
      key,
      (deadline) => this.#client.kv.put({ key: keyBytes(key), value: bytes, lease: lease ?? 0 }, { deadline }),
      lease,
    );
    return Number(response.header.revision);
  }

  async get(key: string): Promise<DiscoveryEntry | undefined> {
    checkKey(backend, key);
    const response = await this.call('get', key, (deadline) =>
      this.#client.kv.range({ key: keyBytes(key) }, { deadline }),
    );
    const kv = response.kvs[0];
    return kv === undefined ? undefined : toEntry(kv);
  }

  async list(prefix: string): Promise<DiscoverySnapshot> {
    checkPrefix(backend, prefix);
    const response = await this.call('list', prefix, (deadline) =>
      this.#client.kv.range({ ...prefixRange(prefix), sort_target: 'Key', sort_order: 'Ascend' }, { deadline }),
    );
    return { entries: response.kvs.map(toEntry), revision: Number(response.header.revision) };
  }

  async delete(key: string): Promise<boolean> {
    checkKey(backend, key);
    const response = await this.call('delete', key, (deadline) =>
      this.#client.kv.deleteRange({ key: keyBytes(key) }, { deadline }),
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
    resolveCommit(
      backend,
      operations,
      () => [],
      () => true,
    );
    const compares = checkCompares(backend, options);
    const prefixes = [
      ...new Set(operations.flatMap((operation) => (operation.type === 'deletePrefix' ? [operation.prefix] : []))),
    ];
    for (let attempt = 0; attempt < this.commitAttempts; attempt++) {
      const read = await Promise.all(prefixes.map((prefix) => this.list(prefix)));
      const existing = new Map(prefixes.map((prefix, i) => [prefix, read[i]!.entries.map((entry) => entry.key)]));
      const writes = resolveCommit(
        backend,
        operations,
        (prefix) => existing.get(prefix) ?? [],
        () => true,
      );
      const response = await this.call('commit', undefined, (deadline) =>
        this.#client.kv.txn(
          {
            // The prefixes were read concurrently, each at its own revision: a key written under
            // one prefix after its read is caught only by a compare against that read's revision.
            compare: [
              ...prefixes.map((prefix, i) => ({
                ...prefixRange(prefix),
                target: 'Mod' as const,
                result: 'Less' as const,
                mod_revision: String(read[i]!.revision + 1),
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
      ).catch(async (error: unknown) => {
        throw error instanceof DiscoveryLeaseError ? await this.missingLease(writes) : error;
      });
      if (response.succeeded) return Number(response.header.revision);
      const current = new Map(
        compares.map(({ key }, i) => [key, Number(response.responses[i]?.response_range.kvs[0]?.mod_revision ?? 0)]),
      );
      const refused = failedCompare(backend, compares, (key) => current.get(key) ?? 0);
      if (refused !== undefined) throw refused;
    }
    const attempts = this.commitAttempts === 1 ? 'its one attempt' : `each of its ${this.commitAttempts} attempts`;
    throw new DiscoveryUnavailableError(backend, 'commit', undefined, {
      why: `another writer changed what it deletes under prefix ${prefixes.map(describeValue).join(' or ')} during ${attempts}`,
    });
  }

  /**
   * The refusal of a commit that etcd refused for a missing lease, naming the lease and the first key put
   * under it. etcd does not say which lease is missing: when the puts name several, each is looked up in
   * turn (one it cannot look up counts as held).
   */
  private async missingLease(writes: ReadonlyMap<string, ResolvedWrite>): Promise<DiscoveryLeaseError> {
    const puts = leasedPuts(writes);
    const leases = [...new Set(puts.map(({ lease }) => lease))];
    let missing = leases[0];
    if (leases.length > 1) {
      for (const lease of leases) {
        if (!(await this.leaseHeld(lease).catch(() => true))) {
          missing = lease;
          break;
        }
      }
    }
    return new DiscoveryLeaseError(backend, missing ?? 'unknown', puts.find(({ lease }) => lease === missing)?.key);
  }

  private async leaseHeld(lease: LeaseId): Promise<boolean> {
    const { TTL } = await this.call('commit', undefined, (deadline) =>
      this.#client.leaseClient.leaseTimeToLive({ ID: lease }, { deadline }),
    );
    return Number(TTL) >= 0;
  }

  async compact(revision: number): Promise<void> {
    const current = await this.call('compact', undefined, (deadline) =>
      this.#client.kv.range({ key: Buffer.from([0]), count_only: true }, { deadline }),
    );
    checkCompactRevision(backend, revision, Number(current.header.revision));
    await this.call('compact', undefined, (deadline) =>
      this.#client.kv.compact({ revision: String(revision), physical: true }, { deadline }).catch((error: unknown) => {
        // etcd refuses a revision at or below its last compaction: that history is gone already, as asked.
        if (error instanceof Error && /required revision has been compacted/.test(error.message)) return undefined;
        throw error;
      }),
    );
  }

  async watch(prefix: string, listener: WatchListener, options: WatchOptions = {}): Promise<DiscoveryWatch> {
    checkPrefix(backend, prefix);
    checkListener(backend, listener);
    checkMethodOptions(backend, 'watch', options);
    let fromRevision = checkFromRevision(backend, options.fromRevision);
    if (fromRevision === undefined) {
      const current = await this.call('watch', prefix, (deadline) =>
        this.#client.kv.range({ ...prefixRange(prefix), count_only: true }, { deadline }),
      );
      fromRevision = Number(current.header.revision) + 1;
    }
    if (this.closed) throw new DiscoveryClosedError(backend, 'watch');
    const watch = new EtcdWatch(
      this,
      prefix,
      listener,
      fromRevision - 1,
      this.hosts,
      this.requestTimeoutMs,
      this.maxReconnectDelayMs,
      (w) => this.watches.delete(w),
    );
    this.watches.add(watch);
    try {
      await watch.start();
    } catch (error) {
      await watch.close();
      throw this.failure(error, 'watch', prefix);
    }
    return watch;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.watches].map((watch) => watch.close()));
    this.#client.close();
  }

  /** @internal A new gRPC watch stream of its own (no deadline: it lives as long as its watch). */
  async openWatchStream(): Promise<IDuplexStream<IWatchRequest, IWatchResponse>> {
    if (this.closed) throw new DiscoveryClosedError(backend, 'watch');
    return this.#client.watchClient.watch();
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
      const response = await request(new Date(Date.now() + this.requestTimeoutMs));
      this.refusals.succeeded();
      return response;
    } catch (error) {
      if (error instanceof etcd3().EtcdLeaseInvalidError)
        throw new DiscoveryLeaseError(backend, lease ?? 'unknown', key);
      if (error instanceof Error && /too many operations in txn/.test(error.message)) {
        throw new DiscoveryArgumentError(
          backend,
          'operations',
          operation,
          `etcd refused the transaction: ${error.message}`,
        );
      }
      throw this.failure(error, operation, key);
    }
  }

  /** A failed request or watch as the package's typed error: a refusal of this client's identity or rights, or an outage. */
  private failure(error: unknown, operation: string, key: string | undefined): DiscoveryError {
    if (error instanceof DiscoveryError) return error;
    const why = etcdLost(this.hosts, error);
    return (
      this.refusals.refusal(error, operation, key) ??
      new DiscoveryUnavailableError(backend, operation, key, { cause: error, ...(why === undefined ? {} : { why }) })
    );
  }
}

/** How gRPC fails a request when it could connect to none of the endpoints. */
const noConnection = /\bUNAVAILABLE: No connection established\b/;
/** How gRPC fails a request or a stream whose connection broke (etcd killed, the network cut). */
const connectionDropped = /\bUNAVAILABLE: (?:Connection dropped|read ECONNRESET)\b/;
const connectFailures: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'no route to the host',
  ENETUNREACH: 'no route to the host',
};

const endpointsOf = (hosts: readonly string[]): string => hosts.map(redactCredentials).join(', ');

/**
 * gRPC's failure to reach etcd, in words: `no etcd answered at <endpoints> (connection refused)` when it
 * could connect to none, `the connection to etcd at <endpoints> dropped` when the one it had broke;
 * undefined for any other failure.
 */
function etcdLost(hosts: readonly string[], error: unknown): string | undefined {
  const text = String(error);
  if (connectionDropped.test(text)) return `the connection to etcd at ${endpointsOf(hosts)} dropped`;
  if (!noConnection.test(text)) return undefined;
  const connectError = /Last error: Error: connect (E[A-Z]+)\b/.exec(text)?.[1];
  const why = connectError === undefined ? undefined : connectFailures[connectError];
  return `no etcd answered at ${endpointsOf(hosts)}${why === undefined ? '' : ` (${why})`}`;
}

type WatchStream = IDuplexStream<IWatchRequest, IWatchResponse>;

/** Why a watch stream is being (re)opened: the view the listener holds decides what it is told first. */
type Reopen = { readonly resync: false } | { readonly resync: true; readonly reason: string };

/**
 * One watch over etcd, on a gRPC watch stream of its own (not the etcd3 client's shared watch
 * manager, whose handlers outlive the streams they belong to). Everything a stream says is
 * ignored once that stream is no longer this watch's current one, so a stale answer cannot reach
 * the listener or throw. When the stream is lost the listener is told `outage` once; the watch
 * then lists the prefix and opens a new stream after that listing, and only when etcd confirms
 * the new stream does the listener get `resync` (the state at the listing) and then `restored`.
 * etcd 3.4 cannot say when a replay from an older revision is complete, so a `restored` that
 * followed a replay could come before the missed changes did. If etcd cancels the watch because
 * its start revision was compacted, the same listing hands the listener a `resync`.
 */
class EtcdWatch implements DiscoveryWatch {
  private stream: WatchStream | undefined;
  /** Why the watch was cut off, in words, while it is. */
  private outage: string | undefined;
  private closed = false;
  private reconnectDelayMs = 100;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private confirmTimer: NodeJS.Timeout | undefined;
  private progressTimer: NodeJS.Timeout | undefined;
  /** The caller of `start`, until etcd accepted the first stream or refused it. */
  private starting: { resolve(): void; reject(error: Error): void } | undefined;

  constructor(
    private readonly store: EtcdDiscoveryStore,
    readonly prefix: string,
    private readonly listener: WatchListener,
    public revision: number,
    private readonly hosts: readonly string[],
    private readonly requestTimeoutMs: number,
    private readonly maxReconnectDelayMs: number,
    private readonly onClose: (watch: EtcdWatch) => void,
  ) {}

  /** Resolves when etcd accepted the first stream; rejects if it could not be reached. */
  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.starting = { resolve, reject };
      void this.open({ resync: false });
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.onClose(this);
    this.drop();
    this.starting?.reject(new DiscoveryClosedError(backend, 'watch'));
    this.starting = undefined;
  }

  /** Opens a stream from `revision + 1`, after listing the prefix if the listener's view must be replaced. */
  private async open(reopen: Reopen): Promise<void> {
    let snapshot: DiscoverySnapshot | undefined;
    let stream: WatchStream;
    try {
      if (reopen.resync) snapshot = await this.store.list(this.prefix);
      stream = await this.store.openWatchStream();
    } catch (error) {
      if (!this.closed) this.failed(asError(error));
      return;
    }
    if (this.closed) {
      discard(stream);
      return;
    }
    this.stream = stream;
    const current = () => stream === this.stream;
    // A stream etcd never confirms (etcd stopped, not gone) counts as lost.
    this.confirmTimer = setTimeout(() => {
      if (current())
        this.failed(
          new Error(`etcd at ${endpointsOf(this.hosts)} did not confirm the watch within ${this.requestTimeoutMs} ms`),
        );
    }, this.requestTimeoutMs);
    stream.on('error', (error: Error) => {
      if (current()) this.failed(error);
    });
    stream.on('end', () => {
      if (current()) this.failed(new Error(`etcd at ${endpointsOf(this.hosts)} ended the watch stream`));
    });
    // Progress requests sent since etcd last said anything on this stream.
    let unanswered = 0;
    stream.on('data', (response: IWatchResponse) => {
      if (!current()) return;
      unanswered = 0;
      clearTimeout(this.confirmTimer);
      if (response.canceled) {
        this.cancelled(response);
      } else if (response.created) {
        if (snapshot !== undefined && reopen.resync) this.replace(snapshot, reopen.reason);
        this.established();
        // A stream that etcd stops answering (etcd frozen, or its host gone without closing the connection)
        // counts as lost too: asked for its progress, a live etcd answers even when nothing changes. Two
        // requests go unanswered first: after this process stalled, its timers run before the answer
        // waiting on the socket is read, and that one request must not make an outage.
        this.progressTimer = setInterval(() => {
          if (!current()) return;
          if (unanswered === 2) {
            this.failed(
              new Error(
                `etcd at ${endpointsOf(this.hosts)} did not answer the watch within ${2 * this.requestTimeoutMs} ms`,
              ),
            );
            return;
          }
          unanswered++;
          stream.write({ progress_request: {} });
        }, this.requestTimeoutMs);
      } else {
        this.deliver(response);
      }
    });
    stream.write({
      create_request: {
        ...prefixRange(this.prefix),
        start_revision: String((snapshot?.revision ?? this.revision) + 1),
      },
    });
  }

  /** etcd cancelled the watch: its start revision was compacted (resync), or it refused it. */
  private cancelled(response: IWatchResponse): void {
    this.drop();
    const compactedTo = Number(response.compact_revision);
    if (compactedTo > 0) {
      const reason = `revision ${this.revision + 1} was compacted (etcd keeps history from revision ${compactedTo})`;
      void this.open({ resync: true, reason });
    } else {
      this.failed(
        new Error(
          `etcd at ${endpointsOf(this.hosts)} cancelled the watch: ${response.cancel_reason || 'no reason given'}`,
        ),
      );
    }
  }

  private established(): void {
    this.starting?.resolve();
    this.starting = undefined;
    this.reconnectDelayMs = 100;
    if (this.outage === undefined) return;
    this.outage = undefined;
    this.notify({ type: 'restored' });
  }

  private replace(snapshot: DiscoverySnapshot, reason: string): void {
    this.revision = snapshot.revision;
    this.notify({ type: 'resync', reason, snapshot });
  }

  /** Cancels the current stream locally; etcd is not waited for (it may be the thing that is gone). */
  private drop(): void {
    const stream = this.stream;
    this.stream = undefined;
    clearTimeout(this.confirmTimer);
    clearInterval(this.progressTimer);
    if (stream !== undefined) discard(stream);
  }

  private deliver(response: IWatchResponse): void {
    let batch: { revision: number; events: DiscoveryEvent[] } | undefined;
    const flush = () => {
      if (batch !== undefined) this.notify({ type: 'changes', ...batch });
      batch = undefined;
    };
    // One revision never spans two responses, since fragmentation is off.
    for (const event of response.events) {
      const revision = Number(event.kv.mod_revision);
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

  /** A stream failed: before the watch started, `start` rejects; after, the watch is in an outage. */
  private failed(error: Error): void {
    const starting = this.starting;
    this.starting = undefined;
    if (starting === undefined) this.lost(error);
    else {
      this.drop();
      starting.reject(error);
    }
  }

  /**
   * The stream was lost: the listener is told once, in words (which endpoints, and how), with the failure as the
   * cause; the resync that ends the outage says why it began, whatever the attempts to reconnect ran into.
   */
  private lost(error: Error): void {
    this.drop();
    if (this.closed) return;
    if (this.outage === undefined) {
      // A failed listing on reconnect is already this package's error: its cause is gRPC's.
      const failure = error instanceof DiscoveryError ? error.cause : error;
      this.outage = etcdLost(this.hosts, failure) ?? error.message;
      this.notify({
        type: 'outage',
        error: new DiscoveryUnavailableError(backend, 'watch', this.prefix, {
          cause: error,
          why: this.outage,
        }),
      });
    }
    const reason = `the watch was cut off: ${this.outage}; this is the state when it was re-established`;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      if (!this.closed) void this.open({ resync: true, reason });
    }, this.reconnectDelayMs);
    this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, this.maxReconnectDelayMs);
  }

  private notify(notice: WatchNotice): void {
    notifyListener(this.listener, notice);
  }
}

/**
 * Cancels a stream on this side. Its write side is ended first: the etcd3 client treats an error
 * on a stream still open for writing (the CANCELLED that follows) as a failed host and closes its
 * channels to it, so every later request would open a new connection.
 */
function discard(stream: WatchStream): void {
  stream.end();
  stream.cancel();
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

export function connectEtcdDiscovery(options: EtcdDiscoveryOptions): EtcdDiscoveryStore {
  return new EtcdDiscoveryStore(options);
}
