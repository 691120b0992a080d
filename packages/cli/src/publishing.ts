import { type ClusterSecret, type DiscoveryStore, openClusterSecret, SqliteDiscoveryStore } from '@kvreuse/discovery';
import { keepCleanupFailures } from '@kvreuse/errors';
import { checkSqlitePath, openDiscoveryFile } from './discovery.js';
import { UsageError } from './errors.js';
import type { Settings } from './settings/all-settings.js';

/**
 * What a sidecar or a demo rank publishes to, and seals its transport metadata with. The store is opened
 * first, the secret then (`startPublishing`): a default secret beside a SQLite file is removed only with
 * that file and under its lock (`abandonPublishing`), so a secret read while this process holds the file open
 * is one no sidecar giving up removes. Read first, it could be removed by one giving up before this process
 * opened the file, and what this one published would be sealed with a secret no reader finds.
 */
export interface Publishing {
  readonly store: DiscoveryStore;
  /** Undefined until it is read. */
  readonly secret: ClusterSecret | undefined;
}

/**
 * Closes the store when the process does not start, and removes what its start created: a new SQLite
 * database unless another process has opened it since, and the default secret created beside it only with
 * it, under its lock. A database kept is one another process publishes to, sealing with that secret.
 */
export async function abandonPublishing({ store, secret }: Publishing): Promise<void> {
  if (!(store instanceof SqliteDiscoveryStore)) return store.close();
  await store.closeRemovingCreatedFile(secret?.createdFile ? { companionFiles: [secret.origin] } : {});
}

/**
 * Starts what publishes to `store`: reads the cluster secret `discovery` names once the store is open (see
 * `Publishing`), and runs `start` with it, in this call. If either throws, the publishing is abandoned
 * (`abandonPublishing`) and the promise rejects with what was thrown, a failure to abandon it kept with it
 * (`keepCleanupFailures`).
 */
export async function startPublishing<T>(
  store: DiscoveryStore,
  discovery: Settings['discovery'],
  start: (secret: ClusterSecret) => T | Promise<T>,
): Promise<T> {
  let secret: ClusterSecret | undefined;
  try {
    secret = openClusterSecret(discovery);
    return await start(secret);
  } catch (error) {
    // What the caller hears is the start that failed, not a failure to undo it.
    throw await abandonPublishing({ store, secret }).then(
      () => error,
      (abandonFailure: unknown) => keepCleanupFailures(error, 'abandoning the publishing', [abandonFailure]),
    );
  }
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
