import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Settings } from './settings/all-settings.js';
import { type DiscoveryStore, openDiscovery } from '@kvreuse/discovery';
import { DiscoveryNotFoundError, InputFileError, UsageError } from './errors.js';

/**
 * Opens the discovery store the settings name, for reading what other processes published: `sqlite`
 * at an existing file (relative to the working directory), or `etcd`. `memory` holds only one
 * process's state, so another process can never read it.
 */
export function openPublishedDiscovery(command: string, settings: Settings['discovery'], cwd: string): DiscoveryStore {
  if (settings.backend === 'memory') {
    throw new UsageError(
      command,
      'discovery.backend = memory holds one process only; use --discovery-backend sqlite (with --discovery-sqlite-path) or etcd (with --discovery-etcd-endpoints)',
    );
  }
  if (settings.backend === 'sqlite') {
    const path = resolve(cwd, settings.sqlitePath);
    const found = statSync(path, { throwIfNoEntry: false });
    if (found === undefined) throw new DiscoveryNotFoundError(path);
    if (found.isDirectory())
      throw new InputFileError(path, 'a directory, not a SQLite discovery file (set --discovery-sqlite-path)');
    return openDiscovery({ ...settings, sqlitePath: path });
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
