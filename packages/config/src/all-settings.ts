import {
  defineSettings,
  type ProvenanceOf,
  type Resolved,
  type SafeResolved,
  type SettingPathOf,
  type SettingsOf,
} from './define-settings.js';
import type { SettingDescription } from './descriptions.js';
import { discoveryGroup } from './groups/discovery.js';
import { drainGroup } from './groups/drain.js';
import { endpointGroup } from './groups/endpoint.js';
import { frontendGroup } from './groups/frontend.js';
import { inventoryGroup } from './groups/inventory.js';
import { profileGroup } from './groups/profile.js';
import { routerGroup } from './groups/router.js';
import { transportGroup } from './groups/transport.js';
import type { ResolveOptions } from './resolve-options.js';

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
