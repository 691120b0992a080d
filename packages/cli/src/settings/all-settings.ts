import {
  defineSettings,
  type ProvenanceOf,
  type ResolveOptions,
  type Resolved,
  type SafeResolved,
  type SettingDescription,
  type SettingPathOf,
  type SettingsOf,
} from '@kvreuse/config';
import { discoveryGroup } from '@kvreuse/discovery';
import { drainGroup } from '@kvreuse/drain';
import { endpointGroup } from '@kvreuse/endpoint';
import { inventoryGroup } from '@kvreuse/inventory';
import { transportGroup } from '@kvreuse/native-bindings';
import { profileGroup } from '@kvreuse/profile-admission';
import { routerGroup } from '@kvreuse/router';
import { frontendGroup } from './frontend.js';

/** Every group kvreuse declares, in the order help and docs list them. */
export const allGroups = [
  routerGroup,
  transportGroup,
  discoveryGroup,
  frontendGroup,
  drainGroup,
  endpointGroup,
  inventoryGroup,
  profileGroup,
] as const;

type AllGroups = typeof allGroups;

/** Every group by name: `catalog.inventory.settings.hashSeed.schema`. */
export const catalog = {
  router: routerGroup,
  transport: transportGroup,
  discovery: discoveryGroup,
  frontend: frontendGroup,
  drain: drainGroup,
  endpoint: endpointGroup,
  inventory: inventoryGroup,
  profile: profileGroup,
} as const satisfies { readonly [Group in AllGroups[number] as Group['name']]: Group };

/** Every kvreuse setting, composed: `defineSettings(allGroups)`. */
export const kvreuseSettings = defineSettings(allGroups);

export type GroupName = AllGroups[number]['name'];
/** Every kvreuse setting, resolved. */
export type Settings = SettingsOf<AllGroups>;
export type SettingPath = SettingPathOf<AllGroups>;
export type SettingsProvenance = ProvenanceOf<AllGroups>;
export type ResolvedSettings = Resolved<AllGroups>;
export type SafeResolveResult = SafeResolved<AllGroups>;

/** Resolves every kvreuse setting (`kvreuseSettings.resolve`); see `defineSettings` for a process's own composition. */
export function resolveSettings(options?: ResolveOptions): ResolvedSettings {
  return kvreuseSettings.resolve(options);
}

/** `resolveSettings` without throwing the resolution's errors (`kvreuseSettings.safeResolve`). */
export function safeResolveSettings(options?: ResolveOptions): SafeResolveResult {
  return kvreuseSettings.safeResolve(options);
}

/** One kvreuse setting by its code path (`kvreuseSettings.describeSetting`); `UnknownSettingError` for a path no setting has. */
export function describeSetting(path: SettingPath): SettingDescription {
  return kvreuseSettings.describeSetting(path);
}

/** Every kvreuse setting's default. */
export const defaultSettings: Settings = kvreuseSettings.defaults;

/** Every kvreuse setting, described, in group order. */
export const settingDescriptions: readonly SettingDescription[] = Object.freeze(
  kvreuseSettings.describe().flatMap((group) => group.settings),
);
