import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { inventoryGroup } from './settings.js';

describe('inventoryGroup', () => {
  const inventory = defineSettings([inventoryGroup]);

  it('resolves alone, to its defaults, and refuses a value that breaks its type', () => {
    expect(inventory.defaults).toEqual({ inventory: { hashSeed: '' } });
    expect(() => inventory.resolve({ argv: ['--inventory-hash-seed=with space'] })).toThrow(InvalidSettingError);
  });
});
