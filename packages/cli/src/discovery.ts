import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Settings } from './settings/all-settings.js';
import { type DiscoveryStore, openDiscovery } from '@kvreuse/discovery';
import { DiscoveryNotFoundError, InputFileError, UsageError } from './errors.js';

/** The discovery settings with every file they name taken from the command's working directory, as every path of the cli is. */
export function discoveryFilesFrom(settings: Settings['discovery'], cwd: string): Settings['discovery'] {
  const from = (path: string): string => (path === '' ? '' : resolve(cwd, path));
  return {
    ...settings,
    sqlitePath: from(settings.sqlitePath),
    secretFile: from(settings.secretFile),
    etcdCaFile: from(settings.etcdCaFile),
    etcdCertFile: from(settings.etcdCertFile),
    etcdKeyFile: from(settings.etcdKeyFile),
    etcdPasswordFile: from(settings.etcdPasswordFile),
  };
}

/**
 * Opens the discovery store the settings name, for reading what other processes published: `sqlite`
 * at an existing file, or `etcd`, each file named taken from the command's working directory. `memory` holds only one
 * process's state, so another process can never read it.
 */
export function openPublishedDiscovery(command: string, given: Settings['discovery'], cwd: string): DiscoveryStore {
  if (given.backend === 'memory') {
    throw new UsageError(
      command,
      'discovery.backend = memory holds one process only; use --discovery-backend sqlite (with --discovery-sqlite-path) or etcd (with --discovery-etcd-endpoints)',
    );
  }
  const settings = discoveryFilesFrom(given, cwd);
  if (settings.backend === 'sqlite') {
    const found = statSync(settings.sqlitePath, { throwIfNoEntry: false });
    if (found === undefined) throw new DiscoveryNotFoundError(settings.sqlitePath);
    if (found.isDirectory())
      throw new InputFileError(
        settings.sqlitePath,
        'a directory, not a SQLite discovery file (set --discovery-sqlite-path)',
      );
  }
  return openDiscovery(settings);
}

/** Every worker id that has anything under the rank parts' key prefix. */
export async function listWorkerIds(store: DiscoveryStore, keyPrefix: string): Promise<string[]> {
  const workersPrefix = `${keyPrefix}workers/`;
  const { entries } = await store.list(workersPrefix);
  return [...new Set(entries.map((entry) => entry.key.slice(workersPrefix.length).split('/')[0]!))]
    .filter((id) => id !== '')
    .sort();
}
