import { messageOf } from './message-of.js';

/** Why looking up or reading a mistyped path failed, in words rather than Node's errno text. */
const fileFailures: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EISDIR: 'a directory, not a file',
  ENOTDIR: 'a folder in its path is a file',
  ENAMETOOLONG: 'a name in it is longer than the file system allows',
  ELOOP: 'it goes through a loop of symbolic links',
};

/**
 * Why a file could not be looked up or read: in words for the failures of a mistyped path (missing, a
 * directory, below a file, a name too long, a loop of links), else the system's own message.
 */
export function describeFileFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const inWords = typeof code === 'string' ? fileFailures[code] : undefined;
  return inWords ?? messageOf(error);
}
