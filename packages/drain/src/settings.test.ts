import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { drainGroup } from './settings.js';

describe('drainGroup', () => {
  const drain = defineSettings([drainGroup]);

  it('resolves alone, to its defaults, and refuses a value that breaks its type', () => {
    expect(drain.defaults).toEqual({ drain: { failedLoadPolicy: 'recompute' } });
    expect(() => drain.resolve({ argv: ['--drain-failed-load-policy=retry'] })).toThrow(InvalidSettingError);
  });
});
