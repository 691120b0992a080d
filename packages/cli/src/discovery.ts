import { dirname, resolve } from 'node:path';
import type { Settings } from './settings/all-settings.js';
import { DiscoveryFileError, DiscoveryFileVersionError, type DiscoveryStore, openDiscovery } from '@kvreuse/discovery';
import { DiscoveryNotFoundError, InputFileError, UsageError } from './errors.js';
import { pathKind } from './path-kind.js';

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
 * Refuses a SQLite discovery path no store could be at — a directory, a FIFO or another file that is not a
 * regular one, a path whose folder is not a directory — and, with `mustExist`, one where nothing is yet.
 */
export function checkSqlitePath(path: string, { mustExist }: { mustExist: boolean }): void {
  const refuse = (problem: string): InputFileError =>
    new InputFileError(path, `${problem} (set --discovery-sqlite-path)`);
  const kind = pathKind(path, refuse);
  if (kind === 'directory') throw refuse('a directory, not a SQLite discovery file');
  if (kind === 'other') throw refuse('not a regular file, so not a SQLite discovery file');
  if (kind === 'file') return;
  const folder = dirname(path);
  const folderKind = pathKind(folder, refuse);
  if (folderKind === 'missing' && mustExist) throw new DiscoveryNotFoundError(path);
  if (folderKind !== 'directory') throw refuse(`its folder ${folder} is not a directory`);
  if (mustExist) throw new DiscoveryNotFoundError(path);
}

/**
 * `openDiscovery`, refusing a SQLite discovery path whose file holds no discovery database, or one of a schema
 * newer than this kvreuse reads, as the bad input it is.
 */
export function openDiscoveryFile(settings: Settings['discovery']): DiscoveryStore {
  try {
    return openDiscovery(settings);
  } catch (error) {
    if (error instanceof DiscoveryFileError)
      throw new InputFileError(
        settings.sqlitePath,
        `${error.reason}, so not a SQLite discovery file (set --discovery-sqlite-path)`,
        { cause: error },
      );
    if (error instanceof DiscoveryFileVersionError)
      throw new InputFileError(
        settings.sqlitePath,
        `a SQLite discovery file of schema version ${error.version}, newer than version ${error.knownVersion}, the ` +
          'newest this kvreuse reads (upgrade kvreuse to read it, or set --discovery-sqlite-path)',
        { cause: error },
      );
    throw error;
  }
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
  if (settings.backend === 'sqlite') checkSqlitePath(settings.sqlitePath, { mustExist: true });
  return openDiscoveryFile(settings);
}

/** Every worker id that has anything under the rank parts' key prefix. */
export async function listWorkerIds(store: DiscoveryStore, keyPrefix: string): Promise<string[]> {
  const workersPrefix = `${keyPrefix}workers/`;
  const { entries } = await store.list(workersPrefix);
  return [...new Set(entries.map((entry) => entry.key.slice(workersPrefix.length).split('/')[0]!))]
    .filter((id) => id !== '')
    .sort();
}
