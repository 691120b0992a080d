import { fileURLToPath } from 'node:url';
import { messageOf } from '@kvreuse/errors';
import { readTextFile } from '@kvreuse/config';
import { InvalidAdmissionInputError, ProfileFileError } from './errors.js';
import { parseProfile, type Profile, type ProfileSettingsOptions } from './profile.js';

/**
 * Reads a profile from a JSON file and checks it like `parseProfile`. Throws `ProfileFileError` when the
 * file cannot be read (it must be a regular UTF-8 file of at most 1 MiB: `readTextFile` of
 * `@kvreuse/config`) or is not JSON, `InvalidProfileError` (naming the file) when the profile is
 * malformed; its settings are checked against `options.settings`.
 */
export function loadProfileFile(file: string | URL, options: ProfileSettingsOptions): Profile {
  if (!(file instanceof URL ? file.protocol === 'file:' : typeof file === 'string' && file !== '')) {
    throw new InvalidAdmissionInputError('file', file, 'must be a path or a file: URL');
  }
  const name = file instanceof URL ? fileURLToPath(file) : file;
  const read = readTextFile(file);
  if (!read.ok) throw new ProfileFileError(name, read.reason, { cause: read.cause });
  let data: unknown;
  try {
    data = JSON.parse(read.text);
  } catch (error) {
    throw new ProfileFileError(name, `not JSON: ${messageOf(error)}`, {
      cause: error,
    });
  }
  return parseProfile(data, { source: name, settings: options.settings });
}
