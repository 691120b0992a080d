import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { describeFileFailure } from '@kvreuse/errors';

/** The most a file read by `readTextFile` may hold: settings files and deployment profiles are a few KiB. */
export const TEXT_FILE_MAX_BYTES = 1024 * 1024;

/** A file read whole as text, or why it was not. */
export type TextFileReading =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; readonly reason: string; readonly cause?: unknown };

const CHUNK_BYTES = 64 * 1024;

/** What a path names when it is not a regular file, in words. */
function notRegular(stat: Stats): string {
  if (stat.isDirectory()) return 'a directory, not a file';
  if (stat.isFIFO()) return 'a named pipe, not a regular file';
  if (stat.isCharacterDevice() || stat.isBlockDevice()) return 'a device, not a regular file';
  if (stat.isSocket()) return 'a socket, not a regular file';
  return 'not a regular file';
}

/**
 * Reads a regular file of at most `TEXT_FILE_MAX_BYTES` whole, as UTF-8 (a byte-order mark is dropped).
 * A symbolic link is followed. Anything else is refused with the reason in words, without waiting and
 * without reading further: a path that cannot be opened, a named pipe or a device (`/dev/zero` would
 * never end), a larger file, or bytes that are not UTF-8 (which would otherwise read as U+FFFD).
 */
export function readTextFile(path: string | URL): TextFileReading {
  let fd: number;
  try {
    // Non-blocking, so that opening a named pipe without a writer returns at once, to be refused.
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (cause) {
    return { ok: false, reason: describeFileFailure(cause), cause };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { ok: false, reason: notRegular(stat) };
    const tooLarge = `larger than ${TEXT_FILE_MAX_BYTES} bytes`;
    if (stat.size > TEXT_FILE_MAX_BYTES) return { ok: false, reason: `${tooLarge} (${stat.size} bytes)` };
    // Read to the end rather than to the size stated, which a file of /proc states as 0, up to the limit.
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.alloc(CHUNK_BYTES);
      const read = readSync(fd, chunk, 0, CHUNK_BYTES, null);
      if (read === 0) break;
      total += read;
      if (total > TEXT_FILE_MAX_BYTES) return { ok: false, reason: tooLarge };
      chunks.push(chunk.subarray(0, read));
    }
    try {
      return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks)) };
    } catch (cause) {
      return { ok: false, reason: 'not UTF-8 text', cause };
    }
  } catch (cause) {
    return { ok: false, reason: describeFileFailure(cause), cause };
  } finally {
    closeSync(fd);
  }
}
