// Argument checks, value encoding and commit resolution shared by the three backends.
import type { DiscoveryBackend } from './backend.js';
import { DiscoveryArgumentError, DiscoveryCompareError, DiscoveryKeyError, DiscoveryValueError } from './errors.js';
import type {
  CommitOptions,
  DiscoveryCompare,
  DiscoveryEntry,
  DiscoveryOperation,
  DiscoveryValue,
  LeaseId,
  WatchListener,
  WatchNotice,
} from './types.js';
import { checkRankPartOwner } from './rank-part-owner.js';

/** etcd's default request limit is 1.5 MiB; keys are kept far below it. */
export const maxKeyBytes = 4096;

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const loneSurrogate = /\p{Cs}/u;

export function checkKey(backend: DiscoveryBackend, key: unknown): string {
  if (typeof key !== 'string') throw new DiscoveryKeyError(backend, key, 'a key is a string');
  if (key.length === 0) throw new DiscoveryKeyError(backend, key, 'a key is not empty');
  return checkKeyText(backend, key);
}

export function checkPrefix(backend: DiscoveryBackend, prefix: unknown): string {
  if (typeof prefix !== 'string') throw new DiscoveryKeyError(backend, prefix, 'a prefix is a string');
  return checkKeyText(backend, prefix);
}

function checkKeyText(backend: DiscoveryBackend, key: string): string {
  if (loneSurrogate.test(key)) throw new DiscoveryKeyError(backend, key, 'it has a lone surrogate (not valid UTF-8)');
  if (utf8.encode(key).byteLength > maxKeyBytes) {
    throw new DiscoveryKeyError(backend, key, `a key has at most ${maxKeyBytes} UTF-8 bytes`);
  }
  return key;
}

/** A value's bytes, as every backend stores them; a rank part under another worker's key is refused. */
export function encodeValue(backend: DiscoveryBackend, key: string, value: unknown): Uint8Array {
  let bytes: Uint8Array;
  if (typeof value === 'string') bytes = utf8.encode(value);
  else if (value instanceof Uint8Array) bytes = value.slice();
  else throw new DiscoveryValueError(backend, key, value, 'a value is a string or a Uint8Array');
  checkRankPartOwner(backend, key, bytes);
  return bytes;
}

/** etcd refuses a lease TTL over 9,000,000,000 s (its `MaxLeaseTTL`); every backend keeps to it, so a TTL works on each. */
export const maxLeaseTtlMs = 9_000_000_000_000;

export function checkTtl(backend: DiscoveryBackend, ttlMs: unknown): number {
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
    throw new DiscoveryArgumentError(backend, 'ttlMs', ttlMs, 'a lease TTL is a positive whole number of milliseconds');
  }
  if (ttlMs > maxLeaseTtlMs) {
    throw new DiscoveryArgumentError(
      backend,
      'ttlMs',
      ttlMs,
      `a lease TTL is at most ${maxLeaseTtlMs} ms (etcd's maximum, 9,000,000,000 s)`,
    );
  }
  return ttlMs;
}

/** A method's options (`put`, `watch`): an object, or the default `{}` for none. */
export function checkMethodOptions(backend: DiscoveryBackend, method: string, options: unknown): void {
  if (options === null || typeof options !== 'object') {
    throw new DiscoveryArgumentError(backend, 'options', options, `${method} options are an object`);
  }
}

/** A store's constructor options: an object, whose `now`, if given, is a function. */
export function checkStoreOptions(backend: DiscoveryBackend, options: unknown): void {
  if (options === null || typeof options !== 'object') {
    throw new DiscoveryArgumentError(backend, 'options', options, 'store options are an object');
  }
  const { now } = options as { now?: unknown };
  if (now !== undefined && typeof now !== 'function') {
    throw new DiscoveryArgumentError(backend, 'now', now, 'a clock is a function returning milliseconds');
  }
}

export function checkListener(backend: DiscoveryBackend, listener: unknown): WatchListener {
  if (typeof listener !== 'function') {
    throw new DiscoveryArgumentError(backend, 'listener', listener, 'a watch listener is a function');
  }
  return listener as WatchListener;
}

/** An optional whole-number option ≥ `minimum` (default 1), or its default. */
export function wholeOption(
  backend: DiscoveryBackend,
  name: string,
  value: unknown,
  fallback: number,
  minimum = 1,
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < minimum) {
    throw new DiscoveryArgumentError(backend, name, value, `${name} is a whole number ≥ ${minimum}`);
  }
  return value;
}

export function checkLeaseId(backend: DiscoveryBackend, lease: unknown): LeaseId {
  if (typeof lease !== 'string' || !/^[1-9][0-9]{0,19}$/.test(lease)) {
    throw new DiscoveryArgumentError(backend, 'lease', lease, 'a lease id is a positive decimal string');
  }
  return lease;
}

export function checkFromRevision(backend: DiscoveryBackend, revision: unknown): number | undefined {
  if (revision === undefined) return undefined;
  if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 1) {
    throw new DiscoveryArgumentError(backend, 'fromRevision', revision, 'a revision is a whole number ≥ 1');
  }
  return revision;
}

export function checkCompactRevision(backend: DiscoveryBackend, revision: unknown, current: number): number {
  if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 1 || revision > current) {
    throw new DiscoveryArgumentError(
      backend,
      'revision',
      revision,
      `compaction takes a revision from 1 to the current ${current}`,
    );
  }
  return revision;
}

/** Decodes an entry's value as strict UTF-8, or throws `DiscoveryValueError` naming the key. */
export function entryText(entry: DiscoveryEntry): string {
  try {
    return strictUtf8.decode(entry.value);
  } catch {
    throw new DiscoveryValueError(undefined, entry.key, entry.value, 'the stored bytes are not valid UTF-8');
  }
}

export function keyBytes(key: string): Buffer {
  return Buffer.from(key, 'utf8');
}

/** The first byte string after every string that starts with `prefix` (etcd's range_end); empty = no end. */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.alloc(0);
}

export function compareKeys(a: string, b: string): number {
  return Buffer.compare(keyBytes(a), keyBytes(b));
}

export type ResolvedWrite =
  | { readonly type: 'put'; readonly value: Uint8Array; readonly lease: LeaseId | undefined }
  | { readonly type: 'delete' };

/**
 * Checks a commit's operations and folds them, in order, into one final write per key, given the
 * keys that exist now under a prefix. Deletes of keys that do not exist are dropped.
 */
export function resolveCommit(
  backend: DiscoveryBackend,
  operations: readonly DiscoveryOperation[],
  existingUnder: (prefix: string) => readonly string[],
  exists: (key: string) => boolean,
): Map<string, ResolvedWrite> {
  if (!Array.isArray(operations)) {
    throw new DiscoveryArgumentError(backend, 'operations', operations, 'a commit takes an array of operations');
  }
  const writes = new Map<string, ResolvedWrite>();
  const deleted: ResolvedWrite = { type: 'delete' };
  operations.forEach((operation: DiscoveryOperation, index) => {
    switch (operation?.type) {
      case 'put': {
        const key = checkKey(backend, operation.key);
        const lease = operation.lease === undefined ? undefined : checkLeaseId(backend, operation.lease);
        writes.set(key, { type: 'put', value: encodeValue(backend, key, operation.value), lease });
        return;
      }
      case 'delete':
        writes.set(checkKey(backend, operation.key), deleted);
        return;
      case 'deletePrefix': {
        const prefix = checkPrefix(backend, operation.prefix);
        for (const key of existingUnder(prefix)) writes.set(key, deleted);
        for (const key of writes.keys()) if (key.startsWith(prefix)) writes.set(key, deleted);
        return;
      }
      default:
        throw new DiscoveryArgumentError(
          backend,
          `operations[${index}]`,
          operation,
          "an operation's type is 'put', 'delete' or 'deletePrefix'",
        );
    }
  });
  for (const [key, write] of writes) if (write.type === 'delete' && !exists(key)) writes.delete(key);
  return writes;
}

/** Checks a commit's conditions: each names a key and a whole modification revision ≥ 0. */
export function checkCompares(
  backend: DiscoveryBackend,
  options: CommitOptions | undefined,
): readonly DiscoveryCompare[] {
  if (options === undefined) return [];
  if (options === null || typeof options !== 'object') {
    throw new DiscoveryArgumentError(backend, 'options', options, 'commit options are an object');
  }
  const { compare } = options;
  if (compare === undefined) return [];
  if (!Array.isArray(compare))
    throw new DiscoveryArgumentError(backend, 'compare', compare, 'compare is an array of conditions');
  return compare.map((condition: DiscoveryCompare, index) => {
    const revision: unknown = condition?.modRevision;
    if (typeof revision !== 'number' || !Number.isSafeInteger(revision) || revision < 0) {
      throw new DiscoveryArgumentError(
        backend,
        `compare[${index}].modRevision`,
        revision,
        'a modification revision is a whole number ≥ 0 (0 = absent)',
      );
    }
    return { key: checkKey(backend, condition.key), modRevision: revision };
  });
}

/** The first condition that does not hold, as the error a commit throws; `modRevisionOf` is 0 for an absent key. */
export function failedCompare(
  backend: DiscoveryBackend,
  compares: readonly DiscoveryCompare[],
  modRevisionOf: (key: string) => number,
): DiscoveryCompareError | undefined {
  for (const { key, modRevision } of compares) {
    const actual = modRevisionOf(key);
    if (actual !== modRevision) return new DiscoveryCompareError(backend, key, modRevision, actual);
  }
  return undefined;
}

/** Calls a watch listener; a listener that throws must not stop delivery, so its error is rethrown apart. */
export function notifyListener(listener: WatchListener, notice: WatchNotice): void {
  try {
    listener(notice);
  } catch (error) {
    queueMicrotask(() => {
      throw error;
    });
  }
}
