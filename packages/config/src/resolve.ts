import { crossFieldRules, type GroupName, type SettingPath, type Settings } from './catalog.js';
import { coerceText } from './coerce.js';
import { settingDescriptions, settingGroups } from './descriptions.js';
import {
  InvalidSettingError,
  isSettingsError,
  ResolveOptionsError,
  UnknownSettingError,
  type InvalidSetting,
  type Provenance,
  type SettingsError,
} from './errors.js';
import { loadSettingsFile, type SettingsFileInput } from './settings-file.js';
import { emptyReading, readArgv, readEnv, readFile, type SourceValue } from './sources.js';

/** An environment as `process.env` has it; only `KVREUSE_*` variables are read. */
export type SettingsEnv = Readonly<Record<string, string | undefined>>;

export interface ResolveSettingsOptions {
  /** A settings file: a path, or text or data already loaded. */
  readonly file?: SettingsFileInput | undefined;
  /** The environment to read; none is read when absent (the library never reads `process.env`). */
  readonly env?: SettingsEnv | undefined;
  /** Setting flags only, e.g. `process.argv.slice(2)` once the CLI has taken its own arguments. */
  readonly argv?: readonly string[] | undefined;
}

/** Where each resolved value came from, shaped like the settings. */
export type SettingsProvenance = {
  readonly [Group in GroupName]: { readonly [Name in keyof Settings[Group]]: Provenance };
};

export interface ResolvedSettings {
  readonly settings: Settings;
  readonly provenance: SettingsProvenance;
}

export type SafeResolveResult =
  | { readonly success: true; readonly data: ResolvedSettings }
  | { readonly success: false; readonly error: SettingsError };

interface Chosen {
  readonly value: unknown;
  readonly source: Provenance;
}

type Checked = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly issue: InvalidSetting };

function describeZodIssues(issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[]): string {
  return issues
    .map(({ path, message }) => (path.length === 0 ? message : `item ${path.map(String).join('.')}: ${message}`))
    .join('; ');
}

function freezeValue(value: unknown): unknown {
  return Array.isArray(value) ? Object.freeze(value) : value;
}

function check({ setting, source, value, isText }: SourceValue): Checked {
  const invalid = (reason: string): Checked => ({
    ok: false,
    issue: { setting: setting.path, value, source, rule: setting.type, reason, related: [] },
  });
  let candidate = value;
  if (isText) {
    const coerced = coerceText(value as string, setting.jsonSchema);
    if (!coerced.ok) return invalid(coerced.reason);
    candidate = coerced.value;
  }
  const parsed = setting.schema.safeParse(candidate);
  if (!parsed.success) return invalid(describeZodIssues(parsed.error.issues));
  return { ok: true, value: freezeValue(parsed.data) };
}

function nest<Leaf>(leaf: (path: SettingPath) => Leaf): Record<string, Record<string, Leaf>> {
  const nested: Record<string, Record<string, Leaf>> = {};
  for (const group of settingGroups) {
    const values: Record<string, Leaf> = {};
    for (const setting of group.settings) values[setting.name] = leaf(setting.path);
    nested[group.name] = Object.freeze(values);
  }
  return Object.freeze(nested);
}

/**
 * Resolves every setting from its default, then the file, then the environment, then argv (later wins).
 * All-or-nothing: it throws `SettingsFileError` for a file that cannot be read, one `UnknownSettingError`
 * listing every unknown name, or one `InvalidSettingError` listing every invalid value of every source
 * and every broken rule between settings.
 */
export function resolveSettings(options: ResolveSettingsOptions = {}): ResolvedSettings {
  if (options.argv !== undefined && !(Array.isArray(options.argv) && options.argv.every((argument) => typeof argument === 'string'))) {
    throw new ResolveOptionsError('argv', options.argv, 'an array of strings');
  }
  if (options.env !== undefined && (typeof options.env !== 'object' || options.env === null)) {
    throw new ResolveOptionsError('env', options.env, 'an object of variables');
  }
  const readings = [
    options.file === undefined ? emptyReading() : readFile(loadSettingsFile(options.file)),
    options.env === undefined ? emptyReading() : readEnv(options.env),
    options.argv === undefined ? emptyReading() : readArgv(options.argv),
  ];
  const unknown = readings.flatMap((reading) => reading.unknown);
  if (unknown.length > 0) throw new UnknownSettingError(unknown);

  const invalid: InvalidSetting[] = [];
  const chosen = new Map<SettingPath, Chosen>(
    settingDescriptions.map((setting) => [setting.path, { value: setting.default, source: { source: 'default' } }]),
  );
  for (const reading of readings) {
    invalid.push(...reading.invalid);
    for (const given of reading.values) {
      const checked = check(given);
      if (checked.ok) chosen.set(given.setting.path, { value: checked.value, source: given.source });
      else invalid.push(checked.issue);
    }
  }
  const broken = new Set(invalid.map((issue) => issue.setting));

  // `chosen` was seeded with every setting's default.
  const pick = (path: SettingPath): Chosen => chosen.get(path) as Chosen;
  const settings = nest((path) => pick(path).value) as unknown as Settings;
  for (const { setting, related, rule, holds } of crossFieldRules) {
    if (broken.has(setting) || related.some((path) => broken.has(path)) || holds(settings)) continue;
    invalid.push({
      setting,
      ...pick(setting),
      rule,
      reason: 'the merged values break the rule',
      related: related.map((path) => ({ setting: path, ...pick(path) })),
    });
  }
  if (invalid.length > 0) throw new InvalidSettingError(invalid);

  return Object.freeze({ settings, provenance: nest((path) => pick(path).source) as unknown as SettingsProvenance });
}

/** `resolveSettings` without throwing: `{ success: true, data }` or `{ success: false, error }`. */
export function safeResolveSettings(options: ResolveSettingsOptions = {}): SafeResolveResult {
  try {
    return { success: true, data: resolveSettings(options) };
  } catch (error) {
    if (isSettingsError(error)) return { success: false, error };
    throw error;
  }
}

/** The settings when nothing is given. */
export const defaultSettings: Settings = resolveSettings().settings;
