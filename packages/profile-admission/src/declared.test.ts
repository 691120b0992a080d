import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveSettings } from '@kvreuse/config';
import { composition } from '../test/support.js';
import { describe, expect, it } from 'vitest';
import { builtInProfile } from './built-in.js';
import { declaredProfile } from './declared.js';

describe('declaredProfile', () => {
  it('declares none by default', () => {
    expect(declaredProfile(resolveSettings().settings, { settings: composition })).toBeUndefined();
  });

  it('declares a built-in profile by name, and refuses a name none has', () => {
    const { settings } = resolveSettings({ env: { KVREUSE_PROFILE_NAME: 'llama-3.1-70b-bf16-b64' } });
    expect(declaredProfile(settings, { settings: composition })).toBe(
      builtInProfile('llama-3.1-70b-bf16-b64', { settings: composition }),
    );
    const unknown = resolveSettings({ argv: ['--profile-name=llama-3.1-70b'] }).settings;
    expect(() => declaredProfile(unknown, { settings: composition })).toThrow(
      expect.objectContaining({ code: 'UNKNOWN_PROFILE', profileName: 'llama-3.1-70b' }),
    );
  });

  it('declares the profile of a file, and refuses a file that holds none', () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-declared-'));
    try {
      const file = join(folder, 'qwen.json');
      writeFileSync(
        file,
        JSON.stringify({ ...builtInProfile('qwen3-0.6b-bf16-b64', { settings: composition }), name: 'qwen-mine' }),
      );
      expect(
        declaredProfile(resolveSettings({ argv: [`--profile-file=${file}`] }).settings, { settings: composition }),
      ).toMatchObject({
        name: 'qwen-mine',
      });
      const missing = join(folder, 'missing.json');
      expect(() =>
        declaredProfile(resolveSettings({ argv: [`--profile-file=${missing}`] }).settings, { settings: composition }),
      ).toThrow(expect.objectContaining({ code: 'PROFILE_FILE_UNREADABLE', file: missing }));
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('refuses settings that declare two profiles or none of the shape it reads', () => {
    const { settings } = resolveSettings();
    const both = { ...settings, profile: { name: 'qwen3-0.6b-bf16-b64', file: 'qwen.json' } };
    expect(() => declaredProfile(both, { settings: composition })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'settings.profile' }),
    );
    expect(() => declaredProfile({ ...settings, profile: undefined } as never, { settings: composition })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'settings.profile' }),
    );
    expect(() => declaredProfile(undefined as never, { settings: composition })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'settings' }),
    );
  });
});
