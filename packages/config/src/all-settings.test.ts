import { describe, expect, it } from 'vitest';
import { allGroups, catalog, defaultSettings, kvreuseSettings, resolveSettings, safeResolveSettings, settingDescriptions } from './all-settings.js';

describe('every kvreuse setting', () => {
  it('composes every group, in order, each also by name in the catalog', () => {
    expect(allGroups.map((group) => group.name)).toEqual(['router', 'transport', 'discovery', 'frontend', 'drain', 'inventory', 'profile']);
    expect(Object.values(catalog)).toEqual([...allGroups]);
    expect(kvreuseSettings.groups).toBe(allGroups);
    expect(kvreuseSettings.foreignGroups).toBe('error');
    expect(settingDescriptions.map((setting) => setting.path)).toEqual(kvreuseSettings.describe().flatMap((group) => group.settings.map((setting) => setting.path)));
  });

  it('resolves through resolveSettings and safeResolveSettings as kvreuseSettings does', () => {
    const options = { argv: ['--transport-backend=loopback'] };
    expect(resolveSettings(options)).toEqual(kvreuseSettings.resolve(options));
    expect(safeResolveSettings(options)).toEqual({ success: true, data: kvreuseSettings.resolve(options) });
    expect(defaultSettings).toBe(kvreuseSettings.defaults);
  });
});
