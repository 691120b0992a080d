import { lstatSync, type Stats, statSync } from 'node:fs';

/** What a path names: nothing, a directory, a regular file, or something else (a FIFO, a socket, a device; a link when not followed). */
export type PathKind = 'missing' | 'directory' | 'file' | 'other';

/** Why a mistyped path cannot be looked up or read, in words rather than Node's errno text. */
const pathFailures: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EISDIR: 'a directory, not a file',
  ENOTDIR: 'a folder in its path is a file',
  ENAMETOOLONG: 'a name in it is longer than the file system allows',
  ELOOP: 'it goes through a loop of symbolic links',
};

/** Why reading or looking up a path failed: in words for a mistyped path, else the system's message. */
export function pathFailureOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code ?? '';
  return pathFailures[code] ?? (error instanceof Error ? error.message : String(error));
}

/**
 * What `path` names, following a last symbolic link unless `followLink` is false. A path through a file
 * (`file.yaml/x`) names nothing; any other failure to look it up is thrown as `refuse` makes it from the reason.
 */
export function pathKind(path: string, refuse: (reason: string) => Error, followLink = true): PathKind {
  let found: Stats | undefined;
  try {
    found = (followLink ? statSync : lstatSync)(path, { throwIfNoEntry: false });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return 'missing';
    throw refuse(`cannot be looked up: ${pathFailureOf(error)}`);
  }
  if (found === undefined) return 'missing';
  if (found.isDirectory()) return 'directory';
  return found.isFile() ? 'file' : 'other';
}
