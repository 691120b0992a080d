import { lstatSync } from 'node:fs';
import { extname, join, resolve } from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node } from 'yaml';
import { describeValue } from '@kvreuse/errors';
import { ConfigArgumentError, isRecord, SettingsFileError } from './errors.js';
import { readTextFile } from './text-file.js';

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
  /**
   * The numbers of each key's value (`section.key`: its own, or its list's items) as the file wrote them,
   * which the parser may have read otherwise (`0.99999999999999999` as 1); empty for data given already parsed.
   */
  readonly numbers: ReadonlyMap<string, readonly string[]>;
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

/** The source text of `node` if it is a number, or of its items that are, if it is a list. */
function numberTexts(node: unknown): string[] {
  const nodes = isSeq(node) ? node.items : [node];
  return nodes.flatMap((item) => (isScalar(item) && typeof item.value === 'number' ? [item.source as string] : []));
}

function positionsOf(contents: Node | null, lineCounter: LineCounter): Pick<LoadedSettingsFile, 'lines' | 'numbers'> {
  const lines = new Map<string, SectionLines>();
  const numbers = new Map<string, readonly string[]>();
  for (const [section, { line, value }] of keyLines(contents, lineCounter)) {
    const keys = new Map<string, number>();
    for (const [key, at] of keyLines(value, lineCounter)) {
      keys.set(key, at.line);
      const texts = numberTexts(at.value);
      if (texts.length > 0) numbers.set(`${section}.${key}`, texts);
    }
    lines.set(section, { line, keys });
  }
  return { lines, numbers };
}

/** Where `position` is in `text`, and the line drawn with a caret under it, as the YAML parser draws its errors. */
function codeFrame(text: string, position: number): string {
  const before = text.slice(0, position).split('\n');
  const line = before.length;
  const column = (before.at(-1) ?? '').length + 1;
  const source = text.split('\n')[line - 1] ?? '';
  return ` at line ${line}, column ${column}:\n\n${source}\n${' '.repeat(column - 1)}^\n`;
}

/** JSON as JSON.parse reads it: no trailing comma, no comment, no single quote, which YAML would take. */
function refuseLaxJson(text: string, origin: string): void {
  try {
    JSON.parse(text);
  } catch (cause) {
    const message = (cause as Error).message;
    const position = /at position (\d+)/.exec(message)?.[1];
    // Node says `at position 47` (and newer ones `(line 1 column 48)`): the code frame says where, once.
    const what = position === undefined ? message : message.replace(/ at position \d+.*$/, '');
    const where = position === undefined ? '' : codeFrame(text, Number(position));
    throw new SettingsFileError(origin, `not valid JSON: ${what}${where}`, { cause });
  }
}

function parseText(
  text: string,
  format: SettingsFileFormat,
  origin: string,
): Pick<LoadedSettingsFile, 'data' | 'lines' | 'numbers'> {
  if (format === 'json' && text.trim() !== '') refuseLaxJson(text, origin);
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
  return { data, ...positionsOf(document.contents, lineCounter) };
}

/**
 * Reads and parses a settings file, keeping the line of every key; throws `SettingsFileError` when it
 * cannot be read (see `readTextFile`: a regular UTF-8 file of at most `TEXT_FILE_MAX_BYTES`) or parsed.
 */
export function loadSettingsFile(input: SettingsFileInput): LoadedSettingsFile {
  checkInput(input);
  if (typeof input === 'string' || 'path' in input) {
    const path = typeof input === 'string' ? input : input.path;
    const read = readTextFile(path);
    if (!read.ok) throw new SettingsFileError(path, `cannot be read: ${read.reason}`, { cause: read.cause });
    return { origin: path, ...parseText(read.text, formatOfPath(path), path) };
  }
  const origin = input.origin ?? INLINE;
  if ('text' in input) return { origin, ...parseText(input.text, input.format ?? 'yaml', origin) };
  return { origin, data: input.data, lines: new Map(), numbers: new Map() };
}

function checkInput(input: SettingsFileInput): void {
  const refuse = (problem: string, value: unknown): never => {
    throw new SettingsFileError(INLINE, `${problem}; got ${describeValue(value)}`);
  };
  if (typeof input === 'string') return;
  if (input === null || typeof input !== 'object')
    return refuse('the input must be a path, { path }, { text, format?, origin? } or { data, origin? }', input);
  if ('path' in input) {
    if (typeof input.path !== 'string' || input.path === '') refuse('path must be a non-empty string', input.path);
    return;
  }
  if ('text' in input) {
    if (typeof input.text !== 'string') refuse('text must be a string', input.text);
    if (input.format !== undefined && input.format !== 'yaml' && input.format !== 'json')
      refuse('format must be yaml or json', input.format);
  }
  if (input.origin !== undefined && typeof input.origin !== 'string') refuse('origin must be a string', input.origin);
}

/** The variable that names a settings file when no `--config` does; never read as a setting. */
export const SETTINGS_FILE_VARIABLE = 'KVREUSE_CONFIG';
/** The file looked for in the working directory when neither `--config` nor `KVREUSE_CONFIG` names one. */
export const SETTINGS_FILE_NAME = 'kvreuse.yaml';

/** A settings file found, and what named it. */
export interface FoundSettingsFile {
  readonly path: string;
  /** `option`: the path given (`--config`); `env`: `KVREUSE_CONFIG`; `cwd`: `./kvreuse.yaml`. */
  readonly from: 'option' | 'env' | 'cwd';
}

/**
 * The settings file of a command, looked up in one order: the path given (`--config`), else the one
 * `KVREUSE_CONFIG` names (an empty one counts as unset), else `kvreuse.yaml` in `cwd` when that name
 * exists (a link to nothing too); undefined when none. An empty `--config` is refused. A file named by
 * the option or the variable is returned whether it exists or not, for reading it to say what is wrong.
 */
export function findSettingsFile(locations: {
  readonly option?: string | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
}): FoundSettingsFile | undefined {
  const refuse = (argument: string, value: unknown, rule: string): never => {
    throw new ConfigArgumentError('findSettingsFile', argument, value, rule);
  };
  if (!isRecord(locations)) refuse('locations', locations, '{ option?, env, cwd }');
  const { option, env, cwd } = locations;
  if (option !== undefined && typeof option !== 'string') refuse('locations.option', option, 'a path or undefined');
  // An empty --config is a mistake (`--config "$UNSET"`), not a request for the fallbacks; an empty
  // KVREUSE_CONFIG is the shell's way to unset it for one command, so that one counts as unset.
  if (option === '') refuse('locations.option', option, 'a non-empty path (--config names a file) or undefined');
  if (!isRecord(env)) refuse('locations.env', env, 'the environment, an object of variables');
  if (typeof cwd !== 'string') refuse('locations.cwd', cwd, 'the directory paths are relative to, a string');
  if (option !== undefined) return { path: resolve(cwd, option), from: 'option' };
  const named = env[SETTINGS_FILE_VARIABLE];
  if (named !== undefined && named !== '') return { path: resolve(cwd, named), from: 'env' };
  const local = join(cwd, SETTINGS_FILE_NAME);
  return lstatSync(local, { throwIfNoEntry: false }) === undefined ? undefined : { path: local, from: 'cwd' };
}
