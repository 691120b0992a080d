// A rank part can only be written under its own worker's key. Every backend checks each value it
// stores under a rank-part key, whoever writes it: a worker whose etcd user may write another
// worker's keys, or a store without access control (memory, SQLite), still cannot publish a rank
// part in another worker's name.
import type { DiscoveryBackend } from './backend.js';
import { RankPartOwnerError } from './errors.js';
import { rankPartKeyWorker } from './rank-part-keys.js';

const text = new TextDecoder('utf-8', { fatal: true });

/** Throws `RankPartOwnerError` when `value`, stored at `key`, is a rank part of another worker than the key's. */
export function checkRankPartOwner(backend: DiscoveryBackend, key: string, value: Uint8Array): void {
  const keyWorkerId = rankPartKeyWorker(key);
  if (keyWorkerId === undefined) return;
  let record: unknown;
  try {
    record = JSON.parse(text.decode(value));
  } catch {
    return; // not a rank part at all: readers refuse it as malformed
  }
  const partWorkerId = (record as { part?: { workerId?: unknown } } | null)?.part?.workerId;
  if (partWorkerId !== undefined && partWorkerId !== keyWorkerId)
    throw new RankPartOwnerError(backend, key, keyWorkerId, partWorkerId);
}
