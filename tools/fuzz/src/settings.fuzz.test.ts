import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  defaultSettings,
  exampleSettingsPath,
  resolveSettings,
  safeResolveSettings,
  settingDescriptions,
  type Settings,
} from '@kvreuse/cli';
import { isSettingsError, type ResolveOptions } from '@kvreuse/config';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { fuzz } from './fuzz-run.js';
import { type Json, mutatedJson, mutatedText } from './mutations.js';

const exampleYaml = readFileSync(exampleSettingsPath, 'utf8');

/** Settings as a settings file holds them: sections of snake_case keys. */
function fileDataOf(settings: Settings): Record<string, Record<string, Json>> {
  const data: Record<string, Record<string, Json>> = {};
  for (const { group, name, key } of settingDescriptions) {
    const value = (settings as unknown as Record<string, Record<string, Json | undefined>>)[group]?.[name];
    if (value !== undefined) (data[group] ??= {})[key] = value;
  }
  return data;
}

const exampleData = fileDataOf(defaultSettings);

/** The defaults as a compact YAML file: every section and key, one line each. */
const defaultsYaml = Object.entries(exampleData)
  .map(
    ([group, keys]) =>
      `${group}:\n${Object.entries(keys)
        .map(([key, value]) => `  ${key}: ${JSON.stringify(value)}\n`)
        .join('')}`,
  )
  .join('');

/** Resolution ends in settings, or in a resolution error naming what was wrong; the throwing form agrees. */
function checkResolution(options: ResolveOptions): void {
  const result = safeResolveSettings(options);
  if (result.success) {
    // Resolved settings are valid settings: written back as a file, they resolve to themselves.
    assert.deepEqual(
      resolveSettings({ file: { data: fileDataOf(result.data.settings) } }).settings,
      result.data.settings,
    );
    return;
  }
  assert.ok(isSettingsError(result.error), String(result.error));
  assert.ok(result.error.message.length > 0);
}

const flagValue = fc.oneof(
  fc.constantFrom('', 'true', 'no', '-1', '0', '1.5', '1e9', '9007199254740993', 'http://127.0.0.1:2379', 'a,b', ' '),
  fc.string({ maxLength: 16 }),
);
const argument = fc.oneof(
  fc
    .tuple(fc.constantFrom(...settingDescriptions.map((setting) => setting.flag)), flagValue)
    .map(([flag, value]) => `${flag}=${value}`),
  fc.constantFrom(...settingDescriptions.map((setting) => setting.flag)),
  fc.constantFrom('--', '-', '--=', '--router', '--no-router-enabled', '--router-enabled=true=false'),
  fc.string({ maxLength: 24 }),
);

describe('settings', () => {
  it('a settings file, as YAML or JSON text, resolves or is refused with a typed error', () => {
    const texts = mutatedText([exampleYaml, defaultsYaml, JSON.stringify(exampleData)]);
    fuzz('settings file text', fc.tuple(texts, fc.constantFrom('yaml' as const, 'json' as const)), ([text, format]) =>
      checkResolution({ file: { text, format, origin: 'fuzz' } }),
    );
  });

  it('settings file data resolves or is refused with a typed error', () => {
    fuzz('settings file data', mutatedJson(exampleData), (data) =>
      checkResolution({ file: { data: data as Record<string, unknown>, origin: 'fuzz' } }),
    );
  });

  it('argv resolves or is refused with a typed error', () => {
    fuzz('settings argv', fc.array(argument, { maxLength: 6 }), (argv) => checkResolution({ argv }));
  });
});
