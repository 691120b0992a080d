import { lstatSync, type Stats, statSync } from 'node:fs';
import { describeFileFailure } from '@kvreuse/errors';

/** What a path names: nothing, a directory, a regular file, or something else (a FIFO, a socket, a device; a link when not followed). */
export type PathKind = 'missing' | 'directory' | 'file' | 'other';

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
    throw refuse(`cannot be looked up: ${describeFileFailure(error)}`);
  }
  if (found === undefined) return 'missing';
  if (found.isDirectory()) return 'directory';
  return found.isFile() ? 'file' : 'other';
}
