import { closeSync, fchmodSync, fstatSync, openSync, statSync } from 'node:fs';

/** Which file a path names: the device and inode it had when looked at. */
export interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
}

export const sameFile = (a: FileIdentity | undefined, b: FileIdentity): boolean => a?.dev === b.dev && a.ino === b.ino;

/** The file `path` names now, or undefined if it names none. */
export function fileAt(path: string): FileIdentity | undefined {
  return statSync(path, { throwIfNoEntry: false });
}

/**
 * The file an opening starts from: created at `path` with exactly `mode` (a umask of 022 would otherwise
 * open a new file to every local user) unless it exists; SQLite then creates the side files with the same
 * bits. `created` says whether this call created it (another process may create it at the same time);
 * undefined if the file that existed was removed before it could be looked at.
 */
export function databaseFileAt(path: string, mode: number): { identity: FileIdentity; created: boolean } | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'wx', mode);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const identity = fileAt(path);
    return identity === undefined ? undefined : { identity, created: false };
  }
  try {
    fchmodSync(fd, mode);
    return { identity: fstatSync(fd), created: true };
  } finally {
    closeSync(fd);
  }
}
