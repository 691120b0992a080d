import { type ClusterSecret, type DiscoveryStore, SqliteDiscoveryStore } from '@kvreuse/discovery';
import { checkSqlitePath, openDiscoveryFile } from './discovery.js';
import { UsageError } from './errors.js';
import type { Settings } from './settings/all-settings.js';

/**
 * What a sidecar publishes engines to, and seals their transport metadata with. The store is opened first,
 * the secret then (`openClusterSecret`): a default secret beside a SQLite file is removed only with that
 * file and under its lock (`abandonPublishing`), so a secret read while this sidecar holds the file open
 * is one no other sidecar removes. Read first, it could be removed by one giving up before this one opened
 * the file, and what this one published would be sealed with a secret no reader finds.
 */
export interface Publishing {
  readonly store: DiscoveryStore;
  /** Undefined until it is read. */
  readonly secret: ClusterSecret | undefined;
}

/**
 * Closes the store when the sidecar does not start, and removes what its start created: a new SQLite
 * database unless another process has opened it since, and the default secret created beside it only with
 * it, under its lock. A database kept is one another process publishes to, sealing with that secret.
 */
export async function abandonPublishing({ store, secret }: Publishing): Promise<void> {
  if (!(store instanceof SqliteDiscoveryStore)) return store.close();
  await store.closeRemovingCreatedFile(secret?.createdFile ? { companionFiles: [secret.origin] } : {});
}

/** The discovery store the sidecar publishes to (its files already absolute): sqlite or etcd, not `memory`. */
export function openPublishingStore(command: string, discovery: Settings['discovery']): DiscoveryStore {
  if (discovery.backend === 'memory')
    throw new UsageError(
      command,
      'discovery.backend = memory holds one process only: readers could not find the engines',
    );
  if (discovery.backend === 'sqlite') checkSqlitePath(discovery.sqlitePath, { mustExist: false });
  return openDiscoveryFile(discovery);
}
