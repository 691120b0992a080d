import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { composed } from '../test/support.js';
import { describe, expect, it } from 'vitest';
import { builtInProfile } from './built-in.js';
import { declaredProfile } from './declared.js';

describe('declaredProfile', () => {
  it('declares none by default', () => {
    expect(declaredProfile(composed.resolve().settings, { settings: composed })).toBeUndefined();
  });

  it('declares a built-in profile by name, and refuses a name none has', () => {
    const { settings } = composed.resolve({ env: { KVREUSE_PROFILE_NAME: 'llama-3.1-70b-bf16-b64' } });
    expect(declaredProfile(settings, { settings: composed })).toBe(
      builtInProfile('llama-3.1-70b-bf16-b64', { settings: composed }),
    );
    const unknown = composed.resolve({ argv: ['--profile-name=llama-3.1-70b'] }).settings;
    expect(() => declaredProfile(unknown, { settings: composed })).toThrow(
      expect.objectContaining({ code: 'UNKNOWN_PROFILE', profileName: 'llama-3.1-70b' }),
    );
  });

  it('declares the profile of a file, and refuses a file that holds none', () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-declared-'));
    try {
      const file = join(folder, 'qwen.json');
      writeFileSync(
        file,
        JSON.stringify({ ...builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed }), name: 'qwen-mine' }),
      );
      expect(
        declaredProfile(composed.resolve({ argv: [`--profile-file=${file}`] }).settings, { settings: composed }),
      ).toMatchObject({
        name: 'qwen-mine',
      });
      const missing = join(folder, 'missing.json');
      expect(() =>
        declaredProfile(composed.resolve({ argv: [`--profile-file=${missing}`] }).settings, {
          settings: composed,
        }),
      ).toThrow(expect.objectContaining({ code: 'PROFILE_FILE_UNREADABLE', file: missing }));
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('refuses settings that declare two profiles or none of the shape it reads', () => {
    const { settings } = composed.resolve();
    const both = { ...settings, profile: { name: 'qwen3-0.6b-bf16-b64', file: 'qwen.json' } };
    expect(() => declaredProfile(both, { settings: composed })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'settings.profile' }),
    );
    expect(() => declaredProfile({ ...settings, profile: undefined } as never, { settings: composed })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'settings.profile' }),
    );
    expect(() => declaredProfile(undefined as never, { settings: composed })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'settings' }),
    );
  });

  it('checks the composition and the profile group whether or not a profile is declared', () => {
    const { settings } = composed.resolve();
    expect(() => declaredProfile(settings, undefined as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'options' }),
    );
    expect(() => declaredProfile(settings, { settings: {} as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'options.settings' }),
    );
    expect(() => declaredProfile({ ...settings, profile: {} } as never, { settings: composed })).toThrow(
      expect.objectContaining({
        code: 'INVALID_ADMISSION_INPUT',
        argument: 'settings.profile.name',
        message: 'settings.profile.name = undefined is refused: must be a string, empty for none',
      }),
    );
    expect(() =>
      declaredProfile({ ...settings, profile: { name: '', file: 7 } } as never, { settings: composed }),
    ).toThrow(expect.objectContaining({ argument: 'settings.profile.file', value: 7 }));
  });
});
