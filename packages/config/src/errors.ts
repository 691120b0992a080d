import type { SettingPath } from './catalog.js';
import { describeValue } from './describe-value.js';

/** Where a value came from. */
export type Provenance =
  | { readonly source: 'default' }
  | { readonly source: 'file'; readonly path: string }
  | { readonly source: 'env'; readonly variable: string }
  | { readonly source: 'argv'; readonly flag: string };

/** A source the caller gave: anything but the defaults. */
export type SettingSource = Exclude<Provenance, { readonly source: 'default' }>;

export function describeProvenance(provenance: Provenance): string {
  switch (provenance.source) {
    case 'default':
      return 'the default';
    case 'file':
      return `file ${provenance.path}`;
    case 'env':
      return `env ${provenance.variable}`;
    case 'argv':
      return `argv ${provenance.flag}`;
  }
}

export interface UnknownSetting {
  /** The name as given: a dotted file key (`router.minimum_transfer_prefix_block`), a section, a variable or a flag. */
  readonly name: string;
  readonly source: SettingSource;
  /** The known name closest to it; absent for an argument that is not a flag at all. */
  readonly closest?: string;
}

/** Names no setting has; the whole resolution fails, and every unknown name is listed. */
export class UnknownSettingError extends Error {
  readonly code = 'UNKNOWN_SETTING';
  readonly unknown: readonly UnknownSetting[];

  constructor(unknown: readonly UnknownSetting[]) {
    const lines = unknown.map(({ name, source, closest }) => {
      const where = source.source === 'file' ? ` in file ${source.path}` : source.source === 'env' ? ' in env' : ' in argv';
      const hint = closest === undefined ? ' (not a setting flag)' : ` (did you mean ${closest}?)`;
      return `  - ${name}${where}${hint}`;
    });
    super(`${unknown.length} unknown setting name(s):\n${lines.join('\n')}`);
    this.name = 'UnknownSettingError';
    this.unknown = unknown;
  }
}

/** A value a rule refers to, next to the one it constrains. */
export interface RelatedSetting {
  readonly setting: SettingPath;
  readonly value: unknown;
  readonly source: Provenance;
}

export interface InvalidSetting {
  readonly setting: SettingPath;
  /** The value as given: a string when it came from env or argv. */
  readonly value: unknown;
  readonly source: Provenance;
  /** The rule it breaks, in words: `integer ≥ 1`, `transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms`. */
  readonly rule: string;
  /** What exactly went wrong. */
  readonly reason: string;
  /** For a rule between settings, the other settings it compares with. */
  readonly related: readonly RelatedSetting[];
}

export function describeInvalidSetting({ setting, value, source, rule, reason, related }: InvalidSetting): string {
  const values = [{ setting, value, source }, ...related].map(
    (given) => `${given.setting} = ${describeValue(given.value)} from ${describeProvenance(given.source)}`,
  );
  return `${values.join(', ')}: ${reason} (rule: ${rule})`;
}

/** Values that break their rules; every bad value of every source is listed, nothing is applied. */
export class InvalidSettingError extends Error {
  readonly code = 'INVALID_SETTING';
  readonly invalid: readonly InvalidSetting[];

  constructor(invalid: readonly InvalidSetting[]) {
    super(`${invalid.length} invalid setting(s):\n${invalid.map((issue) => `  - ${describeInvalidSetting(issue)}`).join('\n')}`);
    this.name = 'InvalidSettingError';
    this.invalid = invalid;
  }
}

/** A settings file that cannot be read or is not a mapping of group sections. */
export class SettingsFileError extends Error {
  readonly code = 'SETTINGS_FILE';
  readonly path: string;

  constructor(path: string, problem: string, options?: { cause: unknown }) {
    super(`settings file ${path}: ${problem}`, options);
    this.name = 'SettingsFileError';
    this.path = path;
  }
}

/**
 * `resolveSettings` called with options of the wrong shape (a programmer error, so it is thrown even
 * by `safeResolveSettings`); names the option and the value given.
 */
export class ResolveOptionsError extends TypeError {
  readonly code = 'INVALID_RESOLVE_OPTIONS';
  readonly option: 'env' | 'argv';
  readonly value: unknown;

  constructor(option: 'env' | 'argv', value: unknown, rule: string) {
    super(`resolveSettings: ${option} must be ${rule}; got ${describeValue(value)}`);
    this.name = 'ResolveOptionsError';
    this.option = option;
    this.value = value;
  }
}

/** Every error resolution reports. */
export type SettingsError = UnknownSettingError | InvalidSettingError | SettingsFileError;

export function isSettingsError(error: unknown): error is SettingsError {
  return error instanceof UnknownSettingError || error instanceof InvalidSettingError || error instanceof SettingsFileError;
}
