import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse } from 'yaml';
import { SettingsFileError } from './errors.js';

export type SettingsFileFormat = 'yaml' | 'json';

/**
 * A settings file: a path to read (format by extension: `.json` is JSON, anything else YAML, which
 * also reads JSON), text already read, or data already parsed. `origin` names in-memory input in
 * provenance and errors (default `<inline>`).
 */
export type SettingsFileInput =
  | string
  | { readonly path: string }
  | { readonly text: string; readonly format?: SettingsFileFormat; readonly origin?: string }
  | { readonly data: unknown; readonly origin?: string };

export interface LoadedSettingsFile {
  /** The path, or the origin given for in-memory input. */
  readonly origin: string;
  /** The parsed document: a mapping of group sections, or null for an empty document. */
  readonly data: unknown;
}

const INLINE = '<inline>';

export function formatOfPath(path: string): SettingsFileFormat {
  return extname(path).toLowerCase() === '.json' ? 'json' : 'yaml';
}

function parseText(text: string, format: SettingsFileFormat, origin: string): unknown {
  try {
    // YAML 1.2 with the JSON schema reads JSON strictly (no `yes`, no bare words); both reject duplicate keys.
    return parse(text, { schema: format === 'json' ? 'json' : 'core', uniqueKeys: true });
  } catch (error) {
    throw new SettingsFileError(origin, `not valid ${format.toUpperCase()}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** Reads and parses a settings file; throws `SettingsFileError` when it cannot be read or parsed. */
export function loadSettingsFile(input: SettingsFileInput): LoadedSettingsFile {
  if (typeof input === 'string' || 'path' in input) {
    const path = typeof input === 'string' ? input : input.path;
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new SettingsFileError(path, `cannot be read: ${(error as Error).message}`, { cause: error });
    }
    return { origin: path, data: parseText(text, formatOfPath(path), path) };
  }
  const origin = input.origin ?? INLINE;
  if ('text' in input) return { origin, data: parseText(input.text, input.format ?? 'yaml', origin) };
  return { origin, data: input.data };
}
