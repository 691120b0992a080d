import { describeGroup, type GroupDescription, type RuleDescription, type SettingDescription } from './descriptions.js';
import { ruleHolds, type GroupRule, type SettingsGroup } from './group.js';

/** What resolution does with a setting of a group the process did not compose. */
export type ForeignGroupsPolicy = 'error' | 'ignore';

export interface CompositionRule {
  readonly group: string;
  readonly description: RuleDescription;
  readonly holds: GroupRule['holds'];
}

/** The composed groups, described and indexed by every name a source may write. */
export interface Composition {
  readonly groups: readonly GroupDescription[];
  readonly groupNames: ReadonlySet<string>;
  readonly settings: readonly SettingDescription[];
  readonly rules: readonly CompositionRule[];
  readonly byPath: ReadonlyMap<string, SettingDescription>;
  readonly byFileKey: ReadonlyMap<string, SettingDescription>;
  readonly byFlag: ReadonlyMap<string, SettingDescription>;
  readonly byEnv: ReadonlyMap<string, SettingDescription>;
  readonly foreignGroups: ForeignGroupsPolicy;
}

export function compose(groups: readonly SettingsGroup[], foreignGroups: ForeignGroupsPolicy): Composition {
  const described = groups.map(describeGroup);
  const settings = described.flatMap((group) => group.settings);
  const indexBy = (field: 'path' | 'fileKey' | 'flag' | 'env'): ReadonlyMap<string, SettingDescription> =>
    new Map(settings.map((setting) => [setting[field], setting]));
  return {
    groups: Object.freeze(described),
    groupNames: new Set(groups.map((group) => group.name)),
    settings: Object.freeze(settings),
    rules: groups.flatMap((group, index) =>
      group.rules.map((rule, ruleIndex) => ({
        group: group.name,
        description: described[index]?.rules[ruleIndex] as RuleDescription,
        holds: (values: Parameters<GroupRule['holds']>[0]) => ruleHolds(group.name, rule, values),
      })),
    ),
    byPath: indexBy('path'),
    byFileKey: indexBy('fileKey'),
    byFlag: indexBy('flag'),
    byEnv: indexBy('env'),
    foreignGroups,
  };
}
