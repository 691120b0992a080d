import { z } from 'zod';
import { catalog, type GroupName, type SettingPath } from './catalog.js';
import { kebabCase, snakeCase, upperSnakeCase } from './names.js';

/** The JSON Schema (draft 2020-12) of one setting's value, as zod generates it. */
export type ValueJsonSchema = Readonly<Record<string, unknown>>;

/** Everything known about one setting, for resolution, help and docs. */
export interface SettingDescription {
  readonly group: GroupName;
  /** camelCase name inside its group: `minimumTransferPrefixBlocks`. */
  readonly name: string;
  /** `router.minimumTransferPrefixBlocks`: how code names it. */
  readonly path: SettingPath;
  /** `minimum_transfer_prefix_blocks`: its key inside the group section of a settings file. */
  readonly key: string;
  /** `router.minimum_transfer_prefix_blocks`: how the docs name it. */
  readonly fileKey: string;
  readonly flag: string;
  readonly env: string;
  /** What values are valid, in words: `integer ≥ 1`. */
  readonly type: string;
  readonly default: unknown;
  readonly unit: string | undefined;
  readonly description: string;
  readonly schema: z.ZodType;
  readonly jsonSchema: ValueJsonSchema;
}

export interface GroupDescription {
  readonly name: GroupName;
  readonly description: string;
  readonly settings: readonly SettingDescription[];
}

export const ENV_PREFIX = 'KVREUSE_';

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function valueJsonSchema(schema: z.ZodType): ValueJsonSchema {
  const { $schema: _draft, ...rest } = z.toJSONSchema(schema);
  return rest;
}

function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === 'number' ? value : undefined;
}

/** Words for a value's rule, from its JSON Schema: `integer 400–599`, `number > 0`, `one of ucx | loopback`. */
export function describeValueRule(schema: ValueJsonSchema): string {
  if (Array.isArray(schema['enum'])) return `one of ${schema['enum'].join(' | ')}`;
  switch (schema['type']) {
    case 'boolean':
      return 'true | false';
    case 'integer':
    case 'number': {
      const minimum = numberOrUndefined(schema['minimum']);
      const maximum = numberOrUndefined(schema['maximum']);
      const exclusiveMinimum = numberOrUndefined(schema['exclusiveMinimum']);
      const multipleOf = numberOrUndefined(schema['multipleOf']);
      const bounds: string[] = [];
      if (minimum !== undefined && maximum !== undefined && maximum !== MAX_SAFE) {
        bounds.push(`${minimum}–${maximum}`);
      } else {
        if (minimum !== undefined) bounds.push(`≥ ${minimum}`);
        if (exclusiveMinimum !== undefined) bounds.push(`> ${exclusiveMinimum}`);
        if (maximum !== undefined && maximum !== MAX_SAFE) bounds.push(`≤ ${maximum}`);
      }
      const text = [schema['type'], ...bounds].join(' ');
      return multipleOf === undefined ? text : `${text}, a multiple of ${multipleOf}`;
    }
    case 'array': {
      const items = describeValueRule((schema['items'] ?? {}) as ValueJsonSchema);
      const minItems = numberOrUndefined(schema['minItems']);
      return minItems === undefined ? `list of ${items}` : `list (at least ${minItems}) of ${items}`;
    }
    case 'string': {
      if (typeof schema['description'] === 'string') return schema['description'];
      return numberOrUndefined(schema['minLength']) === 1 ? 'non-empty string' : 'string';
    }
    default:
      return 'any value';
  }
}

function describeGroups(): readonly GroupDescription[] {
  return Object.entries(catalog).map(([groupName, group]) => {
    const name = groupName as GroupName;
    const settings = Object.entries(group.settings).map(([settingName, declaration]): SettingDescription => {
      const jsonSchema = valueJsonSchema(declaration.schema);
      return Object.freeze({
        group: name,
        name: settingName,
        path: `${name}.${settingName}` as SettingPath,
        key: snakeCase(settingName),
        fileKey: `${snakeCase(name)}.${snakeCase(settingName)}`,
        flag: `--${kebabCase(name)}-${kebabCase(settingName)}`,
        env: `${ENV_PREFIX}${upperSnakeCase(name)}_${upperSnakeCase(settingName)}`,
        type: describeValueRule(jsonSchema),
        default: Array.isArray(declaration.default) ? Object.freeze([...declaration.default]) : declaration.default,
        unit: 'unit' in declaration ? declaration.unit : undefined,
        description: declaration.description,
        schema: declaration.schema,
        jsonSchema,
      });
    });
    return Object.freeze({ name, description: group.description, settings: Object.freeze(settings) });
  });
}

/** Every group with its settings, in catalog order. */
export const settingGroups: readonly GroupDescription[] = Object.freeze(describeGroups());

/** Every setting, in catalog order. */
export const settingDescriptions: readonly SettingDescription[] = Object.freeze(
  settingGroups.flatMap((group) => group.settings),
);

function indexBy(field: 'path' | 'fileKey' | 'flag' | 'env'): ReadonlyMap<string, SettingDescription> {
  return new Map(settingDescriptions.map((description) => [description[field], description]));
}

export const settingsByPath = indexBy('path');
export const settingsByFileKey = indexBy('fileKey');
export const settingsByFlag = indexBy('flag');
export const settingsByEnv = indexBy('env');

/** A value as it is written in env and argv: lists comma-separated, the empty string as `""`, everything else as text. */
export function formatValue(value: unknown): string {
  if (value === '') return '""';
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** The description of one setting by its code name, e.g. `describeSetting('router.minimumTransferPrefixBlocks')`. */
export function describeSetting(path: SettingPath): SettingDescription {
  const description = settingsByPath.get(path);
  if (description === undefined) throw new RangeError(`no setting ${path} in the catalog`);
  return description;
}
