import { ENV_PREFIX } from './descriptions.js';
import { isRecord, ResolveOptionsError } from './errors.js';
import { closestName } from './names.js';
import type { SettingsFileInput } from './settings-file.js';

/** An environment as `process.env` has it; only `KVREUSE_*` variables are read. */
export type SettingsEnv = Readonly<Record<string, string | undefined>>;

export interface ResolveOptions {
  /** A settings file: a path, or text or data already loaded. */
  readonly file?: SettingsFileInput | undefined;
  /** The environment to read; none is read when absent (the library never reads `process.env`). */
  readonly env?: SettingsEnv | undefined;
  /** Setting flags only, e.g. `process.argv.slice(2)` once the CLI has taken its own arguments. */
  readonly argv?: readonly string[] | undefined;
  /**
   * A `KVREUSE_*` variable no composed setting has: `'error'` (the default) refuses it with the other
   * unknown names; `'warn'` leaves it out and lists it in the resolution's `unknownEnv`, for the caller
   * to warn about. A shell exports variables for many programs: one stray variable need not stop them all.
   */
  readonly unknownEnv?: UnknownEnvPolicy | undefined;
}

export type UnknownEnvPolicy = 'error' | 'warn';

const OPTIONS = ['file', 'env', 'argv', 'unknownEnv'] as const;
const FILE_FORMS = [['path'], ['text', 'format', 'origin'], ['data', 'origin']] as const;
const FILE_RULE = 'a path, { path }, { text, format?, origin? } or { data, origin? }';

function refuseUnknownKeys(value: Readonly<Record<string, unknown>>, known: readonly string[], prefix: string): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new ResolveOptionsError(`${prefix}${key}`, value[key], {
        closest: `${prefix}${closestName(key, known) ?? known[0]}`,
      });
    }
  }
}

function optionalString(file: Readonly<Record<string, unknown>>, key: string): void {
  if (file[key] !== undefined && typeof file[key] !== 'string')
    throw new ResolveOptionsError(`file.${key}`, file[key], { rule: 'a string' });
}

function checkFile(file: unknown): void {
  if (typeof file === 'string') return;
  if (!isRecord(file)) throw new ResolveOptionsError('file', file, { rule: FILE_RULE });
  const form = FILE_FORMS.find(([first]) => first in file);
  if (form === undefined) throw new ResolveOptionsError('file', file, { rule: FILE_RULE });
  refuseUnknownKeys(file, form, 'file.');
  if (form[0] === 'path' && typeof file['path'] !== 'string')
    throw new ResolveOptionsError('file.path', file['path'], { rule: 'a string' });
  if (form[0] === 'text' && typeof file['text'] !== 'string')
    throw new ResolveOptionsError('file.text', file['text'], { rule: 'a string' });
  if (file['format'] !== undefined && file['format'] !== 'yaml' && file['format'] !== 'json') {
    throw new ResolveOptionsError('file.format', file['format'], { rule: "'yaml' or 'json'" });
  }
  optionalString(file, 'origin');
}

function checkEnv(env: unknown): void {
  if (!isRecord(env)) throw new ResolveOptionsError('env', env, { rule: 'an object of variables' });
  for (const [variable, value] of Object.entries(env)) {
    if (variable.startsWith(ENV_PREFIX) && value !== undefined && typeof value !== 'string') {
      throw new ResolveOptionsError(`env.${variable}`, value, { rule: 'a string (or undefined, for unset)' });
    }
  }
}

/**
 * Checks the options of a resolution whole: only `file`, `env` and `argv` (a misspelt option is refused
 * naming the closest), each of its type. Throws `ResolveOptionsError`.
 */
export function checkResolveOptions(options: unknown): ResolveOptions {
  if (options === undefined) return {};
  if (!isRecord(options))
    throw new ResolveOptionsError('options', options, { rule: 'an object { file?, env?, argv?, unknownEnv? }' });
  refuseUnknownKeys(options, OPTIONS, '');
  if (options['file'] !== undefined) checkFile(options['file']);
  if (options['env'] !== undefined) checkEnv(options['env']);
  const { unknownEnv } = options;
  if (unknownEnv !== undefined && unknownEnv !== 'error' && unknownEnv !== 'warn')
    throw new ResolveOptionsError('unknownEnv', unknownEnv, { rule: "'error' or 'warn'" });
  const { argv } = options;
  if (argv !== undefined && !(Array.isArray(argv) && argv.every((argument) => typeof argument === 'string'))) {
    throw new ResolveOptionsError('argv', argv, { rule: 'an array of strings' });
  }
  return options as ResolveOptions;
}
