import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { safeResolveSettings, settingDescriptions, type SafeResolveResult } from './all-settings.js';
import type { SettingDescription, ValueJsonSchema } from '@kvreuse/config';

const endpoint = fc
  .tuple(fc.constantFrom('http', 'https'), fc.oneof(fc.domain(), fc.ipV4()), fc.integer({ min: 0, max: 65_535 }))
  .map(([scheme, host, port]) => `${scheme}://${host}:${port}`);

function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === 'number' ? value : undefined;
}

/** Values of a setting's type, from its JSON Schema: mostly valid, some out of bounds. */
function valueOf(schema: ValueJsonSchema): fc.Arbitrary<unknown> {
  if (Array.isArray(schema['enum'])) return fc.constantFrom(...(schema['enum'] as unknown[]));
  const minimum = numberOrUndefined(schema['minimum']) ?? numberOrUndefined(schema['exclusiveMinimum']) ?? 0;
  const maximum = Math.min(numberOrUndefined(schema['maximum']) ?? 1e9, 1e9);
  switch (schema['type']) {
    case 'boolean':
      return fc.boolean();
    case 'integer': {
      const step = numberOrUndefined(schema['multipleOf']) ?? 1;
      return fc
        .integer({ min: Math.floor(minimum / step) - 2, max: Math.ceil(maximum / step) + 2 })
        .map((n) => n * step);
    }
    case 'number':
      return fc
        .double({ min: minimum - 10, max: maximum, noNaN: true, noDefaultInfinity: true })
        .map((n) => (Object.is(n, -0) ? 0 : n));
    case 'array':
      return fc.array(endpoint, { minLength: 0, maxLength: 3 });
    default:
      return fc.string();
  }
}

function asText(value: unknown): string {
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** What a resolution says, without where the values came from. */
function outcome(result: SafeResolveResult): unknown {
  if (result.success) return { settings: result.data.settings };
  return {
    code: result.error.code,
    invalid: 'invalid' in result.error ? result.error.invalid.map(({ setting, rule }) => [setting, rule]) : [],
  };
}

function resolveThroughEverySource(setting: SettingDescription, value: unknown): [unknown, unknown, unknown] {
  const text = asText(value);
  return [
    outcome(safeResolveSettings({ file: { data: { [setting.group]: { [setting.key]: value } } } })),
    outcome(safeResolveSettings({ env: { [setting.env]: text } })),
    outcome(safeResolveSettings({ argv: [`${setting.flag}=${text}`] })),
  ];
}

describe('every setting, through every source', () => {
  it.each(settingDescriptions.map((setting) => [setting.fileKey, setting] as const))(
    '%s: a value written in env and argv resolves as the typed value in a file does',
    (_key, setting) => {
      fc.assert(
        fc.property(valueOf(setting.jsonSchema), (value) => {
          const [file, env, argv] = resolveThroughEverySource(setting, value);
          expect(env).toEqual(file);
          expect(argv).toEqual(file);
        }),
        { numRuns: 60 },
      );
    },
  );
});
