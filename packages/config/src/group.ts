import type { z } from 'zod';
import { describeValue } from '@kvreuse/errors';
import { InvalidGroupError, isRecord } from './errors.js';

/** One setting, declared once; its file key, flag, variable, help and docs are derived from it. */
export interface SettingDeclaration<Schema extends z.ZodType = z.ZodType> {
  readonly schema: Schema;
  readonly default: z.output<Schema>;
  /** Absent for settings that are not quantities (switches, choices, paths). */
  readonly unit?: string;
  readonly description: string;
}

/** The declarations of a group's settings, by camelCase name. */
export type SettingDeclarations<Schemas extends Readonly<Record<string, z.ZodType>>> = {
  readonly [Name in keyof Schemas]: SettingDeclaration<Schemas[Name]>;
};

type Frozen<Value> = Value extends readonly (infer Item)[] ? readonly Item[] : Value;

/** A group's resolved values: camelCase, frozen. */
export type GroupValues<Schemas extends Readonly<Record<string, z.ZodType>>> = {
  readonly [Name in keyof Schemas]: Frozen<z.output<Schemas[Name]>>;
};

/** A rule between settings of one group, checked after the sources are merged. */
export interface GroupRule<Schemas extends Readonly<Record<string, z.ZodType>> = Readonly<Record<string, z.ZodType>>> {
  /** The setting the rule constrains; an error names it. */
  readonly setting: keyof Schemas & string;
  /** The settings it is compared with. */
  readonly related: readonly (keyof Schemas & string)[];
  /** The rule in words, with the settings' file keys: `transport.shutdown_deadline_ms ≥ transport.abandon_timeout_ms`. */
  readonly rule: string;
  /** Why the rule exists, for the docs. */
  readonly why: string;
  holds(values: GroupValues<Schemas>): boolean;
}

export interface GroupDeclaration<Schemas extends Readonly<Record<string, z.ZodType>>> {
  readonly description: string;
  readonly settings: SettingDeclarations<Schemas>;
  readonly rules?: readonly GroupRule<Schemas>[];
}

const GROUP_BRAND: unique symbol = Symbol.for('@kvreuse/config/group');

/** A group of settings one layer owns, made by `defineGroup`; a process composes groups with `defineSettings`. */
export interface SettingsGroup<
  Name extends string = string,
  Schemas extends Readonly<Record<string, z.ZodType>> = Readonly<Record<string, z.ZodType>>,
> {
  readonly name: Name;
  readonly description: string;
  readonly settings: SettingDeclarations<Schemas>;
  readonly rules: readonly GroupRule<Schemas>[];
  readonly [GROUP_BRAND]: true;
}

/** The camelCase name of a group's settings. */
const SETTING_NAME = /^[a-z][a-zA-Z0-9]*$/;
/**
 * Group names are single lowercase words, so that `KVREUSE_<GROUP>_…`, `--<group>-…` and file sections
 * name their group unambiguously, even the group of a setting a process does not compose. None is `no`,
 * since `--no-<flag>` negates a boolean flag, nor `constructor` or `prototype`, names an object takes for
 * its own machinery: a name of such a shape is never another group's.
 */
export const GROUP_NAME = /^(?!(?:no|constructor|prototype)$)[a-z]+$/;

function problemsOf(name: unknown, declaration: unknown): string[] {
  const problems: string[] = [];
  if (typeof name !== 'string' || !GROUP_NAME.test(name)) {
    problems.push('the name must be one lowercase word (a-z), not "no", "constructor" or "prototype"');
  }
  if (!isRecord(declaration))
    return [...problems, 'the declaration must be an object { description, settings, rules? }'];
  for (const key of Object.keys(declaration)) {
    if (!['description', 'settings', 'rules'].includes(key))
      problems.push(`unknown field ${key} (fields: description, settings, rules)`);
  }
  if (typeof declaration['description'] !== 'string' || declaration['description'] === '')
    problems.push('description must be a non-empty string');
  const settings = declaration['settings'];
  if (!isRecord(settings) || Object.keys(settings).length === 0)
    return [...problems, 'settings must be an object of at least one setting'];
  for (const [settingName, setting] of Object.entries(settings)) {
    if (!SETTING_NAME.test(settingName))
      problems.push(`setting ${settingName}: the name must be camelCase (a-z, A-Z, 0-9, starting with a-z)`);
    if (
      !isRecord(setting) ||
      typeof (setting['schema'] as { safeParse?: unknown } | undefined)?.safeParse !== 'function'
    ) {
      problems.push(`setting ${settingName}: must have a zod schema`);
      continue;
    }
    if (typeof setting['description'] !== 'string' || setting['description'] === '')
      problems.push(`setting ${settingName}: description must be a non-empty string`);
    if (!(setting['schema'] as z.ZodType).safeParse(setting['default']).success)
      problems.push(`setting ${settingName}: the default does not pass its schema`);
  }
  const rules = declaration['rules'] ?? [];
  if (!Array.isArray(rules)) return [...problems, 'rules must be an array'];
  for (const [index, rule] of rules.entries()) {
    if (
      !isRecord(rule) ||
      typeof rule['holds'] !== 'function' ||
      typeof rule['rule'] !== 'string' ||
      typeof rule['why'] !== 'string'
    ) {
      problems.push(`rule ${index}: must be { setting, related, rule, why, holds }`);
      continue;
    }
    const named = [rule['setting'], ...(Array.isArray(rule['related']) ? rule['related'] : [undefined])];
    for (const setting of named) {
      if (typeof setting !== 'string' || !(setting in settings))
        problems.push(`rule ${index} (${rule['rule']}): ${String(setting)} is not a setting of the group`);
    }
  }
  return problems;
}

/**
 * Whether `rule` holds for `values` of `group`. A rule that throws is a broken declaration, not a broken
 * setting: `InvalidGroupError` naming the rule and its setting, with what it threw as the cause.
 */
export function ruleHolds<Schemas extends Readonly<Record<string, z.ZodType>>>(
  group: string,
  rule: GroupRule<Schemas>,
  values: GroupValues<Schemas>,
): boolean {
  try {
    return rule.holds(values);
  } catch (cause) {
    const thrown = cause instanceof Error ? cause.message : describeValue(cause);
    throw new InvalidGroupError(
      group,
      [`the rule of setting ${rule.setting} (${rule.rule}) threw instead of answering: ${thrown}`],
      { cause },
    );
  }
}

function defaultsOf(settings: Readonly<Record<string, SettingDeclaration>>): Readonly<Record<string, unknown>> {
  return Object.fromEntries(Object.entries(settings).map(([name, setting]) => [name, setting.default]));
}

/** The problem of a rule the defaults break: the setting it constrains, the rule, and the defaults it compared. */
function brokenByDefaults<Schemas extends Readonly<Record<string, z.ZodType>>>(
  rule: GroupRule<Schemas>,
  defaults: GroupValues<Schemas>,
): string {
  const compared = [rule.setting, ...rule.related].map((setting) => `${setting} ${describeValue(defaults[setting])}`);
  return `setting ${rule.setting}: the defaults break rule ${rule.rule} (defaults: ${compared.join(', ')})`;
}

/**
 * Declares a group of settings: its name (one lowercase word: `router`), description, settings (camelCase
 * names, each a zod schema, default, optional unit and description) and the rules between them. Throws
 * `InvalidGroupError` listing every problem of the declaration, including defaults that break a schema
 * or a rule.
 */
export function defineGroup<const Name extends string, Schemas extends Readonly<Record<string, z.ZodType>>>(
  name: Name,
  declaration: GroupDeclaration<Schemas>,
): SettingsGroup<Name, Schemas> {
  const problems = problemsOf(name, declaration);
  if (problems.length === 0) {
    const defaults = defaultsOf(declaration.settings) as GroupValues<Schemas>;
    for (const rule of declaration.rules ?? []) {
      if (!ruleHolds(String(name), rule, defaults)) problems.push(brokenByDefaults(rule, defaults));
    }
  }
  if (problems.length > 0) throw new InvalidGroupError(String(name), problems);
  return Object.freeze({
    name,
    description: declaration.description,
    settings: Object.freeze(
      Object.fromEntries(
        Object.entries(declaration.settings).map(([setting, { default: value, ...rest }]) => [
          setting,
          Object.freeze({ ...rest, default: Array.isArray(value) ? Object.freeze([...value]) : value }),
        ]),
      ),
    ) as SettingDeclarations<Schemas>,
    rules: Object.freeze(
      (declaration.rules ?? []).map((rule) => Object.freeze({ ...rule, related: Object.freeze([...rule.related]) })),
    ),
    [GROUP_BRAND]: true as const,
  });
}

/** Whether `value` is a group made by `defineGroup` (of any installed copy of this package). */
export function isSettingsGroup(value: unknown): value is SettingsGroup {
  return isRecord(value) && (value as { [GROUP_BRAND]?: unknown })[GROUP_BRAND] === true;
}
