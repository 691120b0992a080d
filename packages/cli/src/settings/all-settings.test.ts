import { describe, expect, it } from 'vitest';
import {
  allGroups,
  catalog,
  defaultSettings,
  describeSetting,
  kvreuseSettings,
  resolveSettings,
  safeResolveSettings,
  settingDescriptions,
} from './all-settings.js';

describe('every kvreuse setting', () => {
  it('composes every group, in order, each also by name in the catalog', () => {
    expect(allGroups.map((group) => group.name)).toEqual([
      'router',
      'transport',
      'discovery',
      'frontend',
      'drain',
      'endpoint',
      'inventory',
      'profile',
    ]);
    expect(Object.values(catalog)).toEqual([...allGroups]);
    expect(kvreuseSettings.groups).toBe(allGroups);
    expect(kvreuseSettings.foreignGroups).toBe('error');
    expect(settingDescriptions.map((setting) => setting.path)).toEqual(
      kvreuseSettings.describe().flatMap((group) => group.settings.map((setting) => setting.path)),
    );
  });

  it('resolves through resolveSettings and safeResolveSettings as kvreuseSettings does', () => {
    const options = { argv: ['--transport-backend=loopback'] };
    expect(resolveSettings(options)).toEqual(kvreuseSettings.resolve(options));
    expect(safeResolveSettings(options)).toEqual({ success: true, data: kvreuseSettings.resolve(options) });
    expect(defaultSettings).toBe(kvreuseSettings.defaults);
  });

  it('describes one setting by its code path, refusing an unknown path with a typed UNKNOWN_SETTING', () => {
    expect(describeSetting('router.minimumTransferPrefixBlocks').flag).toBe('--router-minimum-transfer-prefix-blocks');
    expect(() => describeSetting('router.nope' as never)).toThrow(
      expect.objectContaining({
        code: 'UNKNOWN_SETTING',
        unknown: [{ name: 'router.nope', source: { source: 'code' }, closest: 'router.enableDecodeToPrefillReuse' }],
      }),
    );
  });
});
