import type { DiscoveryBackend } from './backend.js';
import type { DiscoveryUnavailableError } from './errors.js';

/** A lease id, as a decimal string (etcd lease ids are 64-bit). */
export type LeaseId = string;

/** What may be stored: text (stored as its UTF-8 bytes) or bytes. */
export type DiscoveryValue = string | Uint8Array;

/**
 * One stored key. `value` is always the raw bytes as stored, so a reader can inspect and refuse
 * them; `entryText` decodes them as strict UTF-8.
 */
export interface DiscoveryEntry {
  readonly key: string;
  readonly value: Uint8Array;
  /** Revision of the change that created the key (since it last did not exist). */
  readonly createRevision: number;
  /** Revision of the change that last wrote the key. */
  readonly modRevision: number;
  readonly lease: LeaseId | undefined;
}

export interface Lease {
  readonly id: LeaseId;
  /** The TTL the backend granted (etcd rounds up to whole seconds and enforces its minimum). */
  readonly ttlMs: number;
}

export interface PutOptions {
  /** The key is deleted when this lease expires or is revoked. */
  readonly lease?: LeaseId;
}

/** One step of an atomic `commit`. */
export type DiscoveryOperation =
  | { readonly type: 'put'; readonly key: string; readonly value: DiscoveryValue; readonly lease?: LeaseId }
  | { readonly type: 'delete'; readonly key: string }
  | { readonly type: 'deletePrefix'; readonly prefix: string };

/**
 * A condition of a `commit`: `key` was last written at `modRevision` (0 = the key is absent).
 * A commit whose condition does not hold writes nothing and throws `DiscoveryCompareError`.
 */
export interface DiscoveryCompare {
  readonly key: string;
  readonly modRevision: number;
}

export interface CommitOptions {
  /** Every condition must hold, checked in the same transaction as the writes (compare-and-swap). */
  readonly compare?: readonly DiscoveryCompare[];
}

/** Every key under a prefix at one revision. */
export interface DiscoverySnapshot {
  readonly entries: readonly DiscoveryEntry[];
  readonly revision: number;
}

export type DiscoveryEvent =
  | { readonly type: 'put'; readonly entry: DiscoveryEntry }
  | { readonly type: 'delete'; readonly key: string; readonly revision: number };

/**
 * What a watcher is told, in order:
 * - `changes`: every event of one revision under the prefix (one `commit` is one revision, so a
 *   reader never sees half of it);
 * - `resync`: the watcher cannot be given the changes it missed (its history was compacted, or it
 *   was cut off from the backend); `snapshot` is the whole state under the prefix at
 *   `snapshot.revision`, and changes continue after it. Replace what you knew, do not merge;
 * - `outage`: the backend cannot be reached; what you knew may be stale until `restored`;
 * - `restored`: the backend is reachable again and the view is current again: everything missed
 *   during the outage was delivered before it (as `changes`, or as one `resync`).
 *
 * Every notice states something the store held: the view after a `changes` or `resync` notice is
 * the store's state under the prefix at that notice's revision.
 */
export type WatchNotice =
  | { readonly type: 'changes'; readonly revision: number; readonly events: readonly DiscoveryEvent[] }
  | { readonly type: 'resync'; readonly reason: string; readonly snapshot: DiscoverySnapshot }
  | { readonly type: 'outage'; readonly error: DiscoveryUnavailableError }
  | { readonly type: 'restored' };

export type WatchListener = (notice: WatchNotice) => void;

export interface WatchOptions {
  /**
   * Deliver every change with a revision ≥ this one (resume after the last revision you saw + 1).
   * Without it, the watch starts after the store's current revision.
   */
  readonly fromRevision?: number;
}

export interface DiscoveryWatch {
  readonly prefix: string;
  /** The last revision delivered to the listener (changes or resync), or the start revision − 1. */
  readonly revision: number;
  close(): Promise<void>;
}

/**
 * One interface over the three discovery backends (`memory`, `sqlite`, `etcd`). Revisions are one
 * store-wide counter that grows with every change; leases delete their keys when they expire or are
 * revoked, and watchers see those deletes.
 */
export interface DiscoveryStore {
  readonly backend: DiscoveryBackend;
  grantLease(ttlMs: number): Promise<Lease>;
  /** Renews the lease for its full TTL; throws `DiscoveryLeaseError` if it already expired. */
  keepAlive(lease: LeaseId): Promise<void>;
  /** Deletes the lease and its keys; revoking a lease that is already gone is not an error. */
  revokeLease(lease: LeaseId): Promise<void>;
  /** Returns the revision of the write. */
  put(key: string, value: DiscoveryValue, options?: PutOptions): Promise<number>;
  get(key: string): Promise<DiscoveryEntry | undefined>;
  /** Every key that starts with `prefix` ('' lists everything), sorted by key bytes. */
  list(prefix: string): Promise<DiscoverySnapshot>;
  /** Returns whether the key existed. */
  delete(key: string): Promise<boolean>;
  /**
   * Applies the operations atomically, as one revision: readers and watchers see all or none.
   * A key that a `deletePrefix` covers and a `put` writes ends up written. Returns the revision.
   * With `compare`, the commit applies only if every condition holds at that revision; otherwise
   * nothing is written and it throws `DiscoveryCompareError` naming the first key that differed.
   */
  commit(operations: readonly DiscoveryOperation[], options?: CommitOptions): Promise<number>;
  /**
   * Forgets the change history before `revision` (≤ the current revision): a watcher that later
   * asks for an older revision gets a `resync`. etcd compacts its own log; the others trim theirs.
   * Compacting to a revision at or below an earlier compaction does nothing.
   */
  compact(revision: number): Promise<void>;
  /** Resolves once the watch is established. */
  watch(prefix: string, listener: WatchListener, options?: WatchOptions): Promise<DiscoveryWatch>;
  close(): Promise<void>;
}
