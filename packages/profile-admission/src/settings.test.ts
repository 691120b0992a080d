import { describe, expect, it } from 'vitest';
import { defineSettings, InvalidSettingError } from '@kvreuse/config';
import { profileGroup } from './settings.js';

describe('profileGroup', () => {
  const profile = defineSettings([profileGroup]);

  it('declares no profile by default, and one by name or by file, not both', () => {
    expect(profile.defaults.profile).toEqual({ name: '', file: '' });
    expect(profile.resolve({ env: { KVREUSE_PROFILE_NAME: 'qwen3-0.6b-bf16-b64' } }).settings.profile.name).toBe(
      'qwen3-0.6b-bf16-b64',
    );
    expect(() => profile.resolve({ env: { KVREUSE_PROFILE_NAME: 'a', KVREUSE_PROFILE_FILE: 'a.json' } })).toThrow(
      InvalidSettingError,
    );
  });
});
