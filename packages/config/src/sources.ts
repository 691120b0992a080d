import { describeValue } from '@kvreuse/errors';
import { writtenNumbersProblem } from './coerce.js';
import type { Composition } from './composition.js';
import { ENV_PREFIX, type SettingDescription } from './descriptions.js';
import { SettingsFileError, type InvalidSetting, type SettingSource, type UnknownSetting } from './errors.js';
import { GROUP_NAME } from './group.js';
import { closestName } from './names.js';
import { SETTINGS_FILE_VARIABLE, type LoadedSettingsFile } from './settings-file.js';

/** One value one source gives for one setting, not yet validated. */
export interface SourceValue {
  readonly setting: SettingDescription;
  readonly source: SettingSource;
  /** The setting's name as the source wrote it: file key, variable or flag. */
  readonly name: string;
  readonly value: unknown;
  /** Env and argv give strings, which are coerced per the setting's type before validation. */
  readonly isText: boolean;
}

/** A setting of a group the process did not compose, skipped under `foreignGroups: 'ignore'`. */
export interface IgnoredSetting {
  /** The name as written: a dotted file key (or a section), a variable or a flag. */
  readonly name: string;
  readonly source: SettingSource;
  /** The group its name belongs to. */
  readonly group: string;
}

export interface SourceReading {
  readonly values: SourceValue[];
  readonly unknown: UnknownSetting[];
  readonly ignored: IgnoredSetting[];
  /** Problems found while reading the source itself, e.g. a flag without its value. */
  readonly invalid: InvalidSetting[];
}

export function emptyReading(): SourceReading {
  return { values: [], unknown: [], ignored: [], invalid: [] };
}

/** A group nothing composed is this close to is suggested as a typo of a composed one. */
const GROUP_TYPO_DISTANCE = 2;

/**
 * A name no composed setting has: a setting of a foreign group (its group named by the name's shape)
 * is ignored or refused per the policy; any other is unknown, with the closest composed name.
 */
function reportUnmatched(
  reading: SourceReading,
  composition: Composition,
  { name, source, group, field }: { name: string; source: SettingSource; group: string | undefined; field: NameField },
): void {
  if (group !== undefined && GROUP_NAME.test(group) && !composition.groupNames.has(group)) {
    if (composition.foreignGroups === 'ignore') {
      reading.ignored.push({ name, source, group });
      return;
    }
    const closest = closestName(group, composition.groupNames, GROUP_TYPO_DISTANCE);
    reading.unknown.push(
      closest === undefined ? { name, source, foreignGroup: group } : { name, source, foreignGroup: group, closest },
    );
    return;
  }
  const closest = closestName(name, candidateNames(composition, group, field));
  reading.unknown.push(closest === undefined ? { name, source } : { name, source, closest });
}

type NameField = 'fileKey' | 'flag' | 'env';

/** The names to suggest from: those of the group a name names, when it is composed, else every composed one. */
function candidateNames(composition: Composition, group: string | undefined, field: NameField): string[] {
  const inGroup = composition.settings.filter((setting) => setting.group === group);
  return (inGroup.length > 0 ? inGroup : composition.settings).map((setting) => setting[field]);
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fileSource(origin: string, line: number | undefined): SettingSource {
  return line === undefined ? { source: 'file', path: origin } : { source: 'file', path: origin, line };
}

/** A top-level key that is no group: bare setting keys suggest their section (`lease_ttl_ms` → `discovery.lease_ttl_ms`). */
function unknownTopLevelKey(
  reading: SourceReading,
  composition: Composition,
  name: string,
  source: SettingSource,
): void {
  const fileKeysByKey = new Map(composition.settings.map((setting) => [setting.key, setting.fileKey]));
  const closest = closestName(name, [...composition.groupNames, ...fileKeysByKey.keys()]);
  reading.unknown.push(
    closest === undefined ? { name, source } : { name, source, closest: fileKeysByKey.get(closest) ?? closest },
  );
}

export function readFile(
  composition: Composition,
  { origin, data, lines, numbers }: LoadedSettingsFile,
): SourceReading {
  const reading = emptyReading();
  if (data === null || data === undefined) return reading;
  if (!isMapping(data)) {
    throw new SettingsFileError(origin, 'must be a mapping of group sections (router:, transport:, …)');
  }
  for (const [sectionKey, section] of Object.entries(data)) {
    const sectionLines = lines.get(sectionKey);
    const sectionSource = fileSource(origin, sectionLines?.line);
    if (!composition.groupNames.has(sectionKey)) {
      if (!GROUP_NAME.test(sectionKey)) {
        unknownTopLevelKey(reading, composition, sectionKey, sectionSource);
      } else if (composition.foreignGroups === 'ignore' && isMapping(section) && Object.keys(section).length > 0) {
        for (const key of Object.keys(section)) {
          reading.ignored.push({
            name: `${sectionKey}.${key}`,
            source: fileSource(origin, sectionLines?.keys.get(key)),
            group: sectionKey,
          });
        }
      } else {
        reportUnmatched(reading, composition, {
          name: sectionKey,
          source: sectionSource,
          group: sectionKey,
          field: 'fileKey',
        });
      }
      continue;
    }
    if (section === null) continue;
    if (!isMapping(section)) {
      throw new SettingsFileError(
        origin,
        `section ${sectionKey} must be a mapping of settings, not ${describeValue(section)}`,
      );
    }
    for (const [key, value] of Object.entries(section)) {
      const name = `${sectionKey}.${key}`;
      const source = fileSource(origin, sectionLines?.keys.get(key));
      const setting = composition.byFileKey.get(name);
      if (setting === undefined) {
        reportUnmatched(reading, composition, { name, source, group: sectionKey, field: 'fileKey' });
        continue;
      }
      const problem = writtenNumbersProblem(numbers.get(name) ?? [], setting.jsonSchema);
      if (problem === undefined) reading.values.push({ setting, source, name, value, isText: false });
      else
        reading.invalid.push({
          setting: setting.path,
          name,
          value,
          source,
          rule: setting.type,
          reason: problem,
          related: [],
        });
    }
  }
  return reading;
}

const ENV_GROUP = /^KVREUSE_([A-Z]+)_./;

/**
 * Only `KVREUSE_*` variables are read; every one of them must name a composed setting, or (by its
 * `KVREUSE_<GROUP>_` shape) one of a group the policy ignores. Unset (`undefined`) ones are skipped, and
 * so is `KVREUSE_CONFIG`, which names the settings file (`findSettingsFile`).
 */
export function readEnv(composition: Composition, env: Readonly<Record<string, string | undefined>>): SourceReading {
  const reading = emptyReading();
  for (const [variable, value] of Object.entries(env)) {
    if (!variable.startsWith(ENV_PREFIX) || variable === SETTINGS_FILE_VARIABLE || value === undefined) continue;
    const source: SettingSource = { source: 'env', variable };
    const setting = composition.byEnv.get(variable);
    if (setting === undefined) {
      const group = ENV_GROUP.exec(variable)?.[1]?.toLowerCase();
      reportUnmatched(reading, composition, { name: variable, source, group, field: 'env' });
    } else {
      reading.values.push({ setting, source, name: variable, value, isText: true });
    }
  }
  return reading;
}

function isBoolean(setting: SettingDescription): boolean {
  return setting.jsonSchema['type'] === 'boolean';
}

/** The group a flag's shape names: `--<group>-…`, `--no-<group>-…`. */
function groupOfFlag(flag: string): string | undefined {
  const [first, second] = flag.slice(2).split('-');
  return first === 'no' ? second : first;
}

/**
 * `--flag value`, `--flag=value`; boolean flags also bare (`--flag` is true, `--no-flag` false) and never
 * take the next argument. Every argument must be a composed setting's flag or its value (or a flag of a
 * group the policy ignores, with its value); a flag given twice is an error.
 */
export function readArgv(composition: Composition, argv: readonly string[]): SourceReading {
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
    const negated = written.startsWith('--no-')
      ? composition.byFlag.get(`--${written.slice('--no-'.length)}`)
      : undefined;
    const setting =
      composition.byFlag.get(written) ?? (negated !== undefined && isBoolean(negated) ? negated : undefined);
    const source: SettingSource = { source: 'argv', flag: written };
    const next = argv[index + 1];
    const nextIsValue = inline === undefined && next !== undefined && !next.startsWith('--');
    if (setting === undefined) {
      reportUnmatched(reading, composition, { name: written, source, group: groupOfFlag(written), field: 'flag' });
      if (nextIsValue) index++;
      continue;
    }
    let given: { readonly value: unknown; readonly isText: boolean; readonly problem?: string };
    if (setting === negated) {
      given =
        inline === undefined
          ? { value: false, isText: false }
          : { value: inline, isText: true, problem: `${written} takes no value` };
    } else if (isBoolean(setting)) {
      given = inline === undefined ? { value: true, isText: false } : { value: inline, isText: true };
    } else if (inline !== undefined) {
      given = { value: inline, isText: true };
    } else if (nextIsValue) {
      given = { value: next, isText: true };
      index++;
    } else {
      given = {
        value: null,
        isText: false,
        problem: `${written} needs a value: ${written} <value> or ${written}=<value>`,
      };
    }
    const earlier = flagsSeen.get(setting.path);
    flagsSeen.set(setting.path, written);
    const problem =
      earlier === undefined ? given.problem : `given more than once in argv (${earlier}, then ${written})`;
    if (problem === undefined) {
      reading.values.push({ setting, source, name: written, value: given.value, isText: given.isText });
    } else {
      reading.invalid.push({
        setting: setting.path,
        name: written,
        value: given.value,
        source,
        rule: setting.type,
        reason: problem,
        related: [],
      });
    }
  }
  return reading;
}
