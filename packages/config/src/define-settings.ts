import type { z } from 'zod';
import { compose, type ForeignGroupsPolicy } from './composition.js';
import type { GroupDescription, SettingDescription } from './descriptions.js';
import { renderDocs, type DocsOptions } from './docs.js';
import {
  InvalidCompositionError,
  isSettingsError,
  UnknownSettingError,
  type Provenance,
  type SettingsError,
  type UnknownSetting,
} from './errors.js';
import { isSettingsGroup, type GroupValues, type SettingsGroup } from './group.js';
import { renderHelp, type HelpOptions } from './help.js';
import { settingsFileJsonSchema } from './json-schema.js';
import { closestName } from './names.js';
import { resolveComposition } from './resolve.js';
import type { ResolveOptions } from './resolve-options.js';
import type { IgnoredSetting } from './sources.js';

// `any` lets a group of any settings be composed; the types below read each group's own settings back.
type AnyGroup = SettingsGroup<string, any>;

type SchemasOf<Group> =
  Group extends SettingsGroup<string, infer Schemas extends Readonly<Record<string, z.ZodType>>> ? Schemas : never;

/** The resolved settings of a composition: grouped, camelCase, frozen. */
export type SettingsOf<Groups extends readonly AnyGroup[]> = {
  readonly [Group in Groups[number] as Group['name']]: GroupValues<SchemasOf<Group>>;
};

/** Where each resolved value came from, shaped like the settings. */
export type ProvenanceOf<Groups extends readonly AnyGroup[]> = {
  readonly [Group in Groups[number] as Group['name']]: { readonly [Name in keyof SchemasOf<Group>]: Provenance };
};

/** A composed setting's name in code: `router.minimumTransferPrefixBlocks`. */
export type SettingPathOf<Groups extends readonly AnyGroup[]> = Groups[number] extends infer Group
  ? Group extends AnyGroup
    ? `${Group['name']}.${keyof SchemasOf<Group> & string}`
    : never
  : never;

export interface Resolved<Groups extends readonly AnyGroup[]> {
  readonly settings: SettingsOf<Groups>;
  readonly provenance: ProvenanceOf<Groups>;
  /** Settings of groups not composed, skipped under `foreignGroups: 'ignore'` (always empty under `'error'`). */
  readonly ignored: readonly IgnoredSetting[];
  /** `KVREUSE_*` variables no composed setting has, left out under `unknownEnv: 'warn'` (always empty under `'error'`). */
  readonly unknownEnv: readonly UnknownSetting[];
}

export type SafeResolved<Groups extends readonly AnyGroup[]> =
  | { readonly success: true; readonly data: Resolved<Groups> }
  | { readonly success: false; readonly error: SettingsError };

export interface DefineSettingsOptions {
  /**
   * What a setting of a group not composed does — recognised by its shape: a file section `<group>:`,
   * `KVREUSE_<GROUP>_…`, `--<group>-…`. `'error'` (the default) refuses it as unknown; `'ignore'` skips
   * it and lists it in the resolution's `ignored`.
   */
  readonly foreignGroups?: ForeignGroupsPolicy;
}

/** The settings of one composition of groups: resolution, and everything generated from the declarations. */
export interface SettingsDefinition<Groups extends readonly AnyGroup[]> {
  readonly groups: Groups;
  readonly foreignGroups: ForeignGroupsPolicy;
  /** The settings when nothing is given. */
  readonly defaults: SettingsOf<Groups>;
  /**
   * Resolves every composed setting: default < file < env < argv. Throws `ResolveOptionsError` for
   * options of the wrong shape, else `SettingsFileError`, `UnknownSettingError` or `InvalidSettingError`.
   */
  resolve(options?: ResolveOptions): Resolved<Groups>;
  /** `resolve` without throwing the resolution's errors: `{ success: true, data }` or `{ success: false, error }`. */
  safeResolve(options?: ResolveOptions): SafeResolved<Groups>;
  /** Every composed group, with its settings (all their names, type in words, default, unit) and rules. */
  describe(): readonly GroupDescription[];
  /** One setting by its code path; `UnknownSettingError` (with the closest path) for a path not composed. */
  describeSetting(path: SettingPathOf<Groups>): SettingDescription;
  /** The JSON Schema (draft 2020-12) of a settings file for this composition. */
  readonly jsonSchema: Readonly<Record<string, unknown>>;
  /** Help text for a CLI: every composed flag with its variable, file key, type and default. */
  renderHelp(options?: HelpOptions): string;
  /** A Markdown reference of the composed settings. */
  renderDocs(options?: DocsOptions): string;
}

const POLICIES: readonly ForeignGroupsPolicy[] = ['error', 'ignore'];

function checkDefinition(groups: unknown, options: unknown): string[] {
  const problems: string[] = [];
  if (!Array.isArray(groups) || groups.length === 0)
    return ['groups must be a non-empty array of groups made by defineGroup'];
  const names = new Set<string>();
  for (const [index, group] of groups.entries()) {
    if (!isSettingsGroup(group)) problems.push(`groups[${index}] is not a group made by defineGroup`);
    else if (names.has(group.name)) problems.push(`group ${group.name} is composed twice`);
    else names.add(group.name);
  }
  if (options === undefined) return problems;
  if (typeof options !== 'object' || options === null)
    return [...problems, 'options must be an object { foreignGroups? }'];
  for (const key of Object.keys(options)) {
    if (key !== 'foreignGroups') problems.push(`unknown option ${key} (did you mean foreignGroups?)`);
  }
  const { foreignGroups } = options as { foreignGroups?: unknown };
  if (foreignGroups !== undefined && !POLICIES.includes(foreignGroups as ForeignGroupsPolicy)) {
    problems.push(`foreignGroups must be 'error' or 'ignore', not ${JSON.stringify(foreignGroups)}`);
  }
  return problems;
}

/**
 * Composes groups into the settings of one process: `defineSettings([routerGroup, transportGroup])`.
 * Throws `InvalidCompositionError` for anything but distinct groups made by `defineGroup`, or an option
 * it does not take.
 */
export function defineSettings<const Groups extends readonly AnyGroup[]>(
  groups: Groups,
  options?: DefineSettingsOptions,
): SettingsDefinition<Groups> {
  const problems = checkDefinition(groups, options);
  if (problems.length > 0) throw new InvalidCompositionError(problems);
  const foreignGroups = options?.foreignGroups ?? 'error';
  const composition = compose(groups, foreignGroups);
  const resolve = (given?: ResolveOptions): Resolved<Groups> =>
    resolveComposition(composition, given) as unknown as Resolved<Groups>;
  return Object.freeze({
    groups,
    foreignGroups,
    defaults: resolve().settings,
    resolve,
    safeResolve(given?: ResolveOptions): SafeResolved<Groups> {
      try {
        return { success: true, data: resolve(given) };
      } catch (error) {
        if (isSettingsError(error)) return { success: false, error };
        throw error;
      }
    },
    describe: () => composition.groups,
    describeSetting(path: SettingPathOf<Groups>): SettingDescription {
      const description = composition.byPath.get(path);
      if (description !== undefined) return description;
      const name = String(path);
      // Within the group it names, when that group is composed: `router.nope` suggests a router setting.
      const inGroup = composition.settings
        .filter((setting) => name.startsWith(`${setting.group}.`))
        .map((setting) => setting.path);
      const closest = closestName(name, inGroup.length > 0 ? inGroup : composition.byPath.keys());
      throw new UnknownSettingError([
        closest === undefined ? { name, source: { source: 'code' } } : { name, source: { source: 'code' }, closest },
      ]);
    },
    jsonSchema: settingsFileJsonSchema(composition),
    renderHelp: (helpOptions?: HelpOptions) => renderHelp(composition, helpOptions),
    renderDocs: (docsOptions?: DocsOptions) => renderDocs(composition, docsOptions),
  });
}
