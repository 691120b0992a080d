import { rmSync } from 'node:fs';
import { type ClusterSecret, type DiscoveryStore, openClusterSecret, SqliteDiscoveryStore } from '@kvreuse/discovery';
import { checkSqlitePath, openDiscoveryFile } from './discovery.js';
import { UsageError } from './errors.js';
import type { Settings } from './settings/all-settings.js';

/** What a sidecar publishes engines to, and seals their transport metadata with. */
export interface Publishing {
  readonly secret: ClusterSecret;
  readonly store: DiscoveryStore;
}

/**
 * Closes what `openPublishing` opened when the sidecar does not start, and removes what opening it created:
 * a new SQLite database unless another process has opened it since, and the default secret created beside
 * it only with it. A database kept is one another process publishes to, sealing with that secret.
 */
export async function abandonPublishing({ secret, store }: Publishing): Promise<void> {
  let removedDatabase = false;
  if (store instanceof SqliteDiscoveryStore) removedDatabase = await store.closeRemovingCreatedFile();
  else await store.close();
  if (removedDatabase && secret.createdFile) rmSync(secret.origin, { force: true });
}

/** The cluster secret and the discovery store the sidecar publishes to (its files already absolute): sqlite or etcd, not `memory`. */
export function openPublishing(command: string, discovery: Settings['discovery']): Publishing {
  if (discovery.backend === 'memory')
    throw new UsageError(
      command,
      'discovery.backend = memory holds one process only: readers could not find the engines',
    );
  if (discovery.backend === 'sqlite') checkSqlitePath(discovery.sqlitePath, { mustExist: false });
  // The secret before the store: a secret refused leaves no discovery file behind.
  const secret = openClusterSecret(discovery);
  let store: DiscoveryStore;
  try {
    store = openDiscoveryFile(discovery);
  } catch (error) {
    if (secret.createdFile) rmSync(secret.origin, { force: true });
    throw error;
  }
  return { secret, store };
}
