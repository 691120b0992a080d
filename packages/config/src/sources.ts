import {
  ENV_PREFIX,
  settingDescriptions,
  settingGroups,
  settingsByEnv,
  settingsByFileKey,
  settingsByFlag,
  type SettingDescription,
} from './descriptions.js';
import { SettingsFileError, type InvalidSetting, type SettingSource, type UnknownSetting } from './errors.js';
import type { LoadedSettingsFile } from './settings-file.js';
import { closestName, snakeCase } from './names.js';

/** One value one source gives for one setting, not yet validated. */
export interface SourceValue {
  readonly setting: SettingDescription;
  readonly source: SettingSource;
  readonly value: unknown;
  /** Env and argv give strings, which are coerced per the setting's type before validation. */
  readonly isText: boolean;
}

export interface SourceReading {
  readonly values: SourceValue[];
  readonly unknown: UnknownSetting[];
  /** Problems found while reading the source itself, e.g. a flag without its value. */
  readonly invalid: InvalidSetting[];
}

export function emptyReading(): SourceReading {
  return { values: [], unknown: [], invalid: [] };
}

function unknownSetting(name: string, source: SettingSource, candidates: Iterable<string>): UnknownSetting {
  const closest = closestName(name, candidates);
  return closest === undefined ? { name, source } : { name, source, closest };
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const groupKeys = settingGroups.map((group) => snakeCase(group.name));

/** Bare setting keys, so that `minimum_transfer_prefix_blocks:` at the top suggests `router.minimum_transfer_prefix_blocks`. */
const fileKeysByKey = new Map(settingDescriptions.map((setting) => [setting.key, setting.fileKey]));

function unknownSection(name: string, source: SettingSource): UnknownSetting {
  const closest = closestName(name, [...groupKeys, ...fileKeysByKey.keys()]) ?? name;
  return { name, source, closest: fileKeysByKey.get(closest) ?? closest };
}

export function readFile({ origin, data }: LoadedSettingsFile): SourceReading {
  const reading = emptyReading();
  const source: SettingSource = { source: 'file', path: origin };
  if (data === null || data === undefined) return reading;
  if (!isMapping(data)) {
    throw new SettingsFileError(origin, 'must be a mapping of group sections (router:, transport:, …)');
  }
  for (const [sectionKey, section] of Object.entries(data)) {
    if (!groupKeys.includes(sectionKey)) {
      reading.unknown.push(unknownSection(sectionKey, source));
      continue;
    }
    if (section === null) continue;
    if (!isMapping(section)) {
      throw new SettingsFileError(origin, `section ${sectionKey} must be a mapping of settings, not ${JSON.stringify(section)}`);
    }
    for (const [key, value] of Object.entries(section)) {
      const fileKey = `${sectionKey}.${key}`;
      const setting = settingsByFileKey.get(fileKey);
      if (setting === undefined) {
        reading.unknown.push(unknownSetting(fileKey, source, settingsByFileKey.keys()));
      } else {
        reading.values.push({ setting, source, value, isText: false });
      }
    }
  }
  return reading;
}

/** Only `KVREUSE_*` variables are read; every one of them must name a setting. Unset (`undefined`) ones are skipped. */
export function readEnv(env: Readonly<Record<string, string | undefined>>): SourceReading {
  const reading = emptyReading();
  for (const [variable, value] of Object.entries(env)) {
    if (!variable.startsWith(ENV_PREFIX) || value === undefined) continue;
    const source: SettingSource = { source: 'env', variable };
    const setting = settingsByEnv.get(variable);
    if (setting === undefined) {
      reading.unknown.push(unknownSetting(variable, source, settingsByEnv.keys()));
    } else {
      reading.values.push({ setting, source, value, isText: true });
    }
  }
  return reading;
}

function isBoolean(setting: SettingDescription): boolean {
  return setting.jsonSchema['type'] === 'boolean';
}

/**
 * `--flag value`, `--flag=value`; boolean flags also bare (`--flag` is true, `--no-flag` false) and never
 * take the next argument. Every argument must be a known setting flag or its value; a flag given twice
 * is an error.
 */
export function readArgv(argv: readonly string[]): SourceReading {
  const reading = emptyReading();
  const flagsSeen = new Map<string, string>();
  for (let index = 0; index < argv.length; index++) {
    const argument = argv[index] ?? '';
    if (!argument.startsWith('--')) {
      reading.unknown.push({ name: argument, source: { source: 'argv', flag: argument } });
      continue;
    }
    const equals = argument.indexOf('=');
    const written = equals === -1 ? argument : argument.slice(0, equals);
    const inline = equals === -1 ? undefined : argument.slice(equals + 1);
    const negated = written.startsWith('--no-') ? settingsByFlag.get(`--${written.slice('--no-'.length)}`) : undefined;
    const setting = settingsByFlag.get(written) ?? (negated !== undefined && isBoolean(negated) ? negated : undefined);
    const source: SettingSource = { source: 'argv', flag: written };
    const next = argv[index + 1];
    const nextIsValue = inline === undefined && next !== undefined && !next.startsWith('--');
    if (setting === undefined) {
      reading.unknown.push(unknownSetting(written, source, settingsByFlag.keys()));
      if (nextIsValue) index++;
      continue;
    }
    let given: { readonly value: unknown; readonly isText: boolean; readonly problem?: string };
    if (setting === negated) {
      given = inline === undefined ? { value: false, isText: false } : { value: inline, isText: true, problem: `${written} takes no value` };
    } else if (isBoolean(setting)) {
      given = inline === undefined ? { value: true, isText: false } : { value: inline, isText: true };
    } else if (inline !== undefined) {
      given = { value: inline, isText: true };
    } else if (nextIsValue) {
      given = { value: next, isText: true };
      index++;
    } else {
      given = { value: null, isText: false, problem: `${written} needs a value: ${written} <value> or ${written}=<value>` };
    }
    const earlier = flagsSeen.get(setting.path);
    flagsSeen.set(setting.path, written);
    const problem = earlier === undefined ? given.problem : `given more than once in argv (${earlier}, then ${written})`;
    if (problem === undefined) {
      reading.values.push({ setting, source, value: given.value, isText: given.isText });
    } else {
      reading.invalid.push({ setting: setting.path, value: given.value, source, rule: setting.type, reason: problem, related: [] });
    }
  }
  return reading;
}
