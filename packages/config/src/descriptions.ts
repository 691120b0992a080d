import { z } from 'zod';
import type { SettingsGroup } from './group.js';
import { kebabCase, snakeCase, upperSnakeCase } from './names.js';
import { printable } from '@kvreuse/errors';

/** The JSON Schema (draft 2020-12) of one setting's value, as zod generates it. */
export type ValueJsonSchema = Readonly<Record<string, unknown>>;

/** Everything known about one setting, for resolution, help and docs. */
export interface SettingDescription {
  readonly group: string;
  /** camelCase name inside its group: `minimumTransferPrefixBlocks`. */
  readonly name: string;
  /** `router.minimumTransferPrefixBlocks`: how code names it. */
  readonly path: string;
  /** `minimum_transfer_prefix_blocks`: its key inside the group section of a settings file. */
  readonly key: string;
  /** `router.minimum_transfer_prefix_blocks`: how the docs and file errors name it. */
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

/** A rule between settings of one group, by the settings' code paths. */
export interface RuleDescription {
  readonly setting: string;
  readonly related: readonly string[];
  readonly rule: string;
  readonly why: string;
}

export interface GroupDescription {
  readonly name: string;
  readonly description: string;
  readonly settings: readonly SettingDescription[];
  readonly rules: readonly RuleDescription[];
}

export const ENV_PREFIX = 'KVREUSE_';

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/**
 * `value` with every object and array in it frozen. Descriptions and JSON Schemas are shared by every
 * caller of a composition, and resolution reads them: an edit by one caller must not change the others.
 */
export function deepFrozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFrozen(child);
  }
  return value;
}

function valueJsonSchema(schema: z.ZodType): ValueJsonSchema {
  const { $schema: _draft, ...rest } = z.toJSONSchema(schema);
  return deepFrozen(rest);
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

/** A group's settings with every name derived from the declaration, and its rules by code path. */
export function describeGroup(group: SettingsGroup): GroupDescription {
  const settings = Object.entries(group.settings).map(([settingName, declaration]): SettingDescription => {
    const jsonSchema = valueJsonSchema(declaration.schema);
    return Object.freeze({
      group: group.name,
      name: settingName,
      path: `${group.name}.${settingName}`,
      key: snakeCase(settingName),
      fileKey: `${group.name}.${snakeCase(settingName)}`,
      flag: `--${group.name}-${kebabCase(settingName)}`,
      env: `${ENV_PREFIX}${group.name.toUpperCase()}_${upperSnakeCase(settingName)}`,
      type: describeValueRule(jsonSchema),
      default: Array.isArray(declaration.default) ? Object.freeze([...declaration.default]) : declaration.default,
      unit: declaration.unit,
      description: declaration.description,
      schema: declaration.schema,
      jsonSchema,
    });
  });
  const rules = group.rules.map(({ setting, related, rule, why }) =>
    Object.freeze({
      setting: `${group.name}.${setting}`,
      related: Object.freeze(related.map((name) => `${group.name}.${name}`)),
      rule,
      why,
    }),
  );
  return Object.freeze({
    name: group.name,
    description: group.description,
    settings: Object.freeze(settings),
    rules: Object.freeze(rules),
  });
}

/**
 * A value as it is written in env and argv: lists comma-separated, the empty string as `""`, everything
 * else as text. Control characters are escaped (`\u001b`), as in setting names, so that the value stays
 * one line of text.
 */
export function formatValue(value: unknown): string {
  if (value === '') return '""';
  return printable(Array.isArray(value) ? value.join(',') : String(value));
}
