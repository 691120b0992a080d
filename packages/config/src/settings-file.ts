import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { isMap, isScalar, LineCounter, parseDocument, type Node } from 'yaml';
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

/** The line (1-based) of each section key of a file, and of each key inside a section. */
export interface SectionLines {
  readonly line: number;
  readonly keys: ReadonlyMap<string, number>;
}

export interface LoadedSettingsFile {
  /** The path, or the origin given for in-memory input. */
  readonly origin: string;
  /** The parsed document: a mapping of group sections, or null for an empty document. */
  readonly data: unknown;
  /** Where each section and key was written; empty for data given already parsed. */
  readonly lines: ReadonlyMap<string, SectionLines>;
}

const INLINE = '<inline>';

export function formatOfPath(path: string): SettingsFileFormat {
  return extname(path).toLowerCase() === '.json' ? 'json' : 'yaml';
}

function keyLines(node: unknown, lineCounter: LineCounter): Map<string, { line: number; value: unknown }> {
  const lines = new Map<string, { line: number; value: unknown }>();
  if (!isMap(node)) return lines;
  for (const { key, value } of node.items) {
    if (!isScalar(key) || key.range === undefined || key.range === null) continue;
    lines.set(String(key.value), { line: lineCounter.linePos(key.range[0]).line, value });
  }
  return lines;
}

function linesOf(contents: Node | null, lineCounter: LineCounter): Map<string, SectionLines> {
  const sections = new Map<string, SectionLines>();
  for (const [section, { line, value }] of keyLines(contents, lineCounter)) {
    const keys = new Map([...keyLines(value, lineCounter)].map(([key, at]) => [key, at.line]));
    sections.set(section, { line, keys });
  }
  return sections;
}

function parseText(
  text: string,
  format: SettingsFileFormat,
  origin: string,
): Pick<LoadedSettingsFile, 'data' | 'lines'> {
  const lineCounter = new LineCounter();
  // YAML 1.2 with the JSON schema reads JSON strictly (no `yes`, no bare words); both reject duplicate keys.
  const document = parseDocument(text, { schema: format === 'json' ? 'json' : 'core', uniqueKeys: true, lineCounter });
  const [error] = document.errors;
  if (error !== undefined)
    throw new SettingsFileError(origin, `not valid ${format.toUpperCase()}: ${error.message}`, { cause: error });
  let data: unknown;
  try {
    // Aliases are only resolved here: one without its anchor, or too many of them, throws.
    data = document.toJS();
  } catch (cause) {
    throw new SettingsFileError(origin, `not valid ${format.toUpperCase()}: ${(cause as Error).message}`, { cause });
  }
  return { data, lines: linesOf(document.contents, lineCounter) };
}

/** Reads and parses a settings file, keeping the line of every key; throws `SettingsFileError` when it cannot be read or parsed. */
export function loadSettingsFile(input: SettingsFileInput): LoadedSettingsFile {
  if (typeof input === 'string' || 'path' in input) {
    const path = typeof input === 'string' ? input : input.path;
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new SettingsFileError(path, `cannot be read: ${(error as Error).message}`, { cause: error });
    }
    return { origin: path, ...parseText(text, formatOfPath(path), path) };
  }
  const origin = input.origin ?? INLINE;
  if ('text' in input) return { origin, ...parseText(input.text, input.format ?? 'yaml', origin) };
  return { origin, data: input.data, lines: new Map() };
}
