import { readFileSync } from 'node:fs';
import { describeFileFailure } from '@kvreuse/errors';
import { ProfileFileError } from './errors.js';
import { parseProfile, type Profile, type ProfileSettingsOptions } from './profile.js';

/**
 * Reads a profile from a JSON file and checks it like `parseProfile`. Throws `ProfileFileError` when the
 * file cannot be read or is not JSON, `InvalidProfileError` (naming the file) when the profile is malformed;
 * its settings are checked against `options.settings`.
 */
export function loadProfileFile(file: string | URL, options: ProfileSettingsOptions): Profile {
  const name = file instanceof URL ? file.pathname : file;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ProfileFileError(name, describeFileFailure(error), { cause: error });
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new ProfileFileError(name, `not JSON: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  return parseProfile(data, { source: name, settings: options.settings });
}
