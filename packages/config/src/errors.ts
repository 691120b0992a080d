import {
  codeOf,
  describeValue,
  KvreuseError,
  KvreuseTypeError,
  printable,
  redactCredentials,
  redactValue,
} from '@kvreuse/errors';

/** Where a value came from; a file value with the line of its key when the file was read from text. */
export type Provenance =
  | { readonly source: 'default' }
  | { readonly source: 'file'; readonly path: string; readonly line?: number }
  | { readonly source: 'env'; readonly variable: string }
  | { readonly source: 'argv'; readonly flag: string };

/** A source the caller gave: anything but the defaults. */
export type SettingSource = Exclude<Provenance, { readonly source: 'default' }>;

/** `file k.yaml:3`, `env KVREUSE_X`, `argv --x`, `the default`. */
export function describeProvenance(provenance: Provenance): string {
  switch (provenance.source) {
    case 'default':
      return 'the default';
    case 'file':
      return `file ${provenance.path}${provenance.line === undefined ? '' : `:${provenance.line}`}`;
    case 'env':
      return `env ${provenance.variable}`;
    case 'argv':
      return `argv ${provenance.flag}`;
  }
}

/** `in file k.yaml:3`, `in env`, `in argv`, `by default`: where a name was written. */
function describeWhere(source: Provenance | { readonly source: 'code' }): string {
  switch (source.source) {
    case 'default':
      return 'by default';
    case 'file':
      return `in ${describeProvenance(source)}`;
    case 'code':
      return 'in code';
    default:
      return `in ${source.source}`;
  }
}

/** Whether a value is a record of fields: an object, not null and not an array. */
export function isRecord(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Every error code of this package. */
export type ConfigErrorCode =
  | 'UNKNOWN_SETTING'
  | 'INVALID_SETTING'
  | 'SETTINGS_FILE'
  | 'INVALID_RESOLVE_OPTIONS'
  | 'INVALID_GROUP'
  | 'INVALID_COMPOSITION'
  | 'INVALID_ARGUMENT';

export interface UnknownSetting {
  /**
   * The name as written: a dotted file key (`router.minimum_transfer_prefix_block`) or a section, a
   * variable, a flag, or a code path given to `describeSetting`.
   */
  readonly name: string;
  readonly source: SettingSource | { readonly source: 'code' };
  /** The known name closest to it; absent for an argument that is not a flag at all, or a group nothing composed is close to. */
  readonly closest?: string;
  /** For a name of a group the process did not compose (`foreignGroups: 'error'`): that group. */
  readonly foreignGroup?: string;
}

/**
 * An unknown name in words: where it was written, and the closest known name (`--transport-bakend in argv
 * (did you mean --transport-backend?)`). Control characters are escaped (`\u001b`).
 */
export function describeUnknownSetting({ name, source, closest, foreignGroup }: UnknownSetting): string {
  const hint =
    foreignGroup !== undefined
      ? ` (group ${foreignGroup} is not composed by this process${closest === undefined ? '' : `; did you mean ${closest}?`})`
      : closest === undefined
        ? ' (not a setting flag)'
        : ` (did you mean ${closest}?)`;
  return printable(`${name} ${describeWhere(source)}${hint}`);
}

function nameWithoutCredentials(unknown: UnknownSetting): UnknownSetting {
  const { name, source } = unknown;
  return {
    ...unknown,
    name: redactCredentials(name),
    source: source.source === 'argv' ? { ...source, flag: redactCredentials(source.flag) } : source,
  };
}

/** Names no composed setting has; the whole resolution fails, and every unknown name is listed. */
export class UnknownSettingError extends KvreuseError<ConfigErrorCode> {
  readonly code = 'UNKNOWN_SETTING';
  readonly unknown: readonly UnknownSetting[];

  /** Credentials in a URL among the names (an argv value left without its flag) are kept as `***`. */
  constructor(given: readonly UnknownSetting[]) {
    const unknown = given.map(nameWithoutCredentials);
    super(
      `${unknown.length} unknown setting name(s):\n${unknown.map((name) => `  - ${describeUnknownSetting(name)}`).join('\n')}`,
    );
    this.name = 'UnknownSettingError';
    this.unknown = unknown;
  }
}

/** A value a rule refers to, next to the one it constrains. */
export interface RelatedSetting {
  /** The setting's code path: `transport.operationTimeoutMs`. */
  readonly setting: string;
  /** The name as written where the value came from: file key, variable or flag (the file key for a default). */
  readonly name: string;
  readonly value: unknown;
  readonly source: Provenance;
}

export interface InvalidSetting extends RelatedSetting {
  /** The value as given: a string when it came from env or argv. */
  readonly value: unknown;
  /** The rule it breaks, in words: `integer ≥ 1`, `transport.abandon_timeout_ms ≥ 2 × transport.operation_timeout_ms`. */
  readonly rule: string;
  /** What exactly went wrong. */
  readonly reason: string;
  /** For a rule between settings, the other settings it compares with. */
  readonly related: readonly RelatedSetting[];
}

/** `router.minimum_transfer_prefix_blocks = 0 in file k.yaml:3: Too small… (rule: integer ≥ 1)`; control characters escaped. */
export function describeInvalidSetting({ name, value, source, rule, reason, related }: InvalidSetting): string {
  const values = [{ name, value, source }, ...related].map(
    (given) => `${given.name} = ${describeValue(given.value)} ${describeWhere(given.source)}`,
  );
  return printable(`${values.join(', ')}: ${reason} (rule: ${rule})`);
}

function withoutCredentials(issue: InvalidSetting): InvalidSetting {
  return {
    ...issue,
    value: redactValue(issue.value),
    reason: redactCredentials(issue.reason),
    related: issue.related.map((related) => ({ ...related, value: redactValue(related.value) })),
  };
}

/** Values that break their rules; every bad value of every source is listed, nothing is applied. */
export class InvalidSettingError extends KvreuseError<ConfigErrorCode> {
  readonly code = 'INVALID_SETTING';
  readonly invalid: readonly InvalidSetting[];

  /** Credentials in a URL among the values (`http://user:password@host`) are kept as `***` (`redactValue`). */
  constructor(given: readonly InvalidSetting[]) {
    const invalid = given.map(withoutCredentials);
    super(
      `${invalid.length} invalid setting(s):\n${invalid.map((issue) => `  - ${describeInvalidSetting(issue)}`).join('\n')}`,
    );
    this.name = 'InvalidSettingError';
    this.invalid = invalid;
  }
}

/** A settings file that cannot be read or parsed, or is not a mapping of group sections. */
export class SettingsFileError extends KvreuseError<ConfigErrorCode> {
  readonly code = 'SETTINGS_FILE';
  readonly path: string;

  constructor(path: string, problem: string, options?: { cause: unknown }) {
    super(`settings file ${path}: ${problem}`, options);
    this.name = 'SettingsFileError';
    this.path = path;
  }
}

/**
 * `resolve` called with options of the wrong shape: an unknown option (named with the closest one), or
 * an option of the wrong type. A programmer error, so it is thrown even by `safeResolve`.
 */
export class ResolveOptionsError extends KvreuseTypeError<ConfigErrorCode> {
  readonly code = 'INVALID_RESOLVE_OPTIONS';
  /** The option as written (`args`, `file.format`, `env.KVREUSE_X`), or `options` for the whole argument. */
  readonly option: string;
  readonly value: unknown;
  /** For an unknown option: the closest known one. */
  readonly closest?: string;

  constructor(option: string, value: unknown, problem: { readonly rule: string } | { readonly closest: string }) {
    super(
      'closest' in problem
        ? `resolve: unknown option ${option} (did you mean ${problem.closest}?)`
        : `resolve: ${option} must be ${problem.rule}; got ${describeValue(value)}`,
    );
    this.name = 'ResolveOptionsError';
    this.option = option;
    this.value = value;
    if ('closest' in problem) this.closest = problem.closest;
  }
}

/**
 * A `defineGroup` declaration that cannot make a group, every problem listed; or a rule of a group that
 * throws instead of answering, when its group is defined or resolved (what it threw is the `cause`). Its
 * message names the group, and each problem the setting or rule it is about.
 */
export class InvalidGroupError extends KvreuseTypeError<ConfigErrorCode> {
  readonly code = 'INVALID_GROUP';
  readonly group: string;
  readonly problems: readonly string[];

  constructor(group: string, problems: readonly string[], options?: ErrorOptions) {
    super(`settings group ${group}: ${problems.join('; ')}`, options);
    this.name = 'InvalidGroupError';
    this.group = group;
    this.problems = problems;
  }
}

/** `defineSettings` given something that is not a composition of distinct groups, or options it does not take. */
export class InvalidCompositionError extends KvreuseTypeError<ConfigErrorCode> {
  readonly code = 'INVALID_COMPOSITION';
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super(`defineSettings: ${problems.join('; ')}`);
    this.name = 'InvalidCompositionError';
    this.problems = problems;
  }
}

/**
 * A function of this package called with an argument of the wrong shape (`findSettingsFile(undefined)`,
 * `closestName(5, …)`): a programmer error, named by function and argument. Nothing was done.
 */
export class ConfigArgumentError extends KvreuseTypeError<ConfigErrorCode> {
  readonly code = 'INVALID_ARGUMENT';

  constructor(
    readonly fn: string,
    /** The argument, or the field of one (`locations.cwd`). */
    readonly argument: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`${fn}: ${argument} must be ${rule}; got ${describeValue(value)}`);
  }
}

/** Every error of this package. */
export type ConfigError =
  | UnknownSettingError
  | InvalidSettingError
  | SettingsFileError
  | ResolveOptionsError
  | InvalidGroupError
  | InvalidCompositionError
  | ConfigArgumentError;

/** Every error resolution reports (as `safeResolve`'s `error`). */
export type SettingsError = UnknownSettingError | InvalidSettingError | SettingsFileError;

const CODES: ReadonlySet<string> = new Set<ConfigErrorCode>([
  'UNKNOWN_SETTING',
  'INVALID_SETTING',
  'SETTINGS_FILE',
  'INVALID_RESOLVE_OPTIONS',
  'INVALID_GROUP',
  'INVALID_COMPOSITION',
  'INVALID_ARGUMENT',
]);
const RESOLUTION_CODES: ReadonlySet<string> = new Set<ConfigErrorCode>([
  'UNKNOWN_SETTING',
  'INVALID_SETTING',
  'SETTINGS_FILE',
]);

function configCodeOf(error: unknown): string | undefined {
  const code = codeOf(error);
  return code !== undefined && CODES.has(code) ? code : undefined;
}

/**
 * Whether `error` is an error of `@kvreuse/config`, thrown by this copy of the package or by any other
 * installed copy (it checks the kvreuse error brand and the `code`, not `instanceof`).
 */
export function isConfigError(error: unknown): error is ConfigError {
  return configCodeOf(error) !== undefined;
}

/** Whether `error` is one resolution reports (`UNKNOWN_SETTING`, `INVALID_SETTING`, `SETTINGS_FILE`), from any installed copy. */
export function isSettingsError(error: unknown): error is SettingsError {
  const code = configCodeOf(error);
  return code !== undefined && RESOLUTION_CODES.has(code);
}
