import { coerceText } from './coerce.js';
import type { Composition } from './composition.js';
import type { SettingDescription } from './descriptions.js';
import {
  InvalidSettingError,
  UnknownSettingError,
  type InvalidSetting,
  type Provenance,
  type UnknownSetting,
} from './errors.js';
import { checkResolveOptions } from './resolve-options.js';
import { loadSettingsFile } from './settings-file.js';
import {
  emptyReading,
  readArgv,
  readEnv,
  readFile,
  type IgnoredSetting,
  type SourceReading,
  type SourceValue,
} from './sources.js';

type Nested<Leaf> = Readonly<Record<string, Readonly<Record<string, Leaf>>>>;

/** A resolution before it is typed by its composition. */
export interface Resolution {
  readonly settings: Nested<unknown>;
  readonly provenance: Nested<Provenance>;
  readonly ignored: readonly IgnoredSetting[];
  readonly unknownEnv: readonly UnknownSetting[];
}

interface Chosen {
  readonly value: unknown;
  readonly source: Provenance;
  readonly name: string;
}

type Checked = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly issue: InvalidSetting };

function describeZodIssues(
  issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[],
): string {
  return issues
    .map(({ path, message }) => (path.length === 0 ? message : `item ${path.map(String).join('.')}: ${message}`))
    .join('; ');
}

function freezeValue(value: unknown): unknown {
  return Array.isArray(value) ? Object.freeze(value) : value;
}

function check({ setting, source, name, value, isText }: SourceValue): Checked {
  const invalid = (reason: string): Checked => ({
    ok: false,
    issue: { setting: setting.path, name, value, source, rule: setting.type, reason, related: [] },
  });
  let candidate = value;
  if (isText) {
    const coerced = coerceText(value as string, setting.jsonSchema);
    if (!coerced.ok) return invalid(coerced.reason);
    candidate = coerced.value;
  }
  const parsed = setting.schema.safeParse(candidate);
  if (!parsed.success) return invalid(describeZodIssues(parsed.error.issues));
  return { ok: true, value: freezeValue(parsed.data) };
}

function nest<Leaf>(composition: Composition, leaf: (setting: SettingDescription) => Leaf): Nested<Leaf> {
  return Object.freeze(
    Object.fromEntries(
      composition.groups.map((group) => [
        group.name,
        Object.freeze(Object.fromEntries(group.settings.map((setting) => [setting.name, leaf(setting)]))),
      ]),
    ),
  );
}

/**
 * Resolves every composed setting from its default, then the file, then the environment, then argv
 * (later wins). All-or-nothing: it throws `SettingsFileError` for a file that cannot be read, one
 * `UnknownSettingError` listing every unknown name (but unknown variables under `unknownEnv: 'warn'`), or one `InvalidSettingError` listing every invalid
 * value of every source and every broken rule between settings.
 */
export function resolveComposition(composition: Composition, given: unknown): Resolution {
  const options = checkResolveOptions(given);
  const readings = [
    options.file === undefined ? emptyReading() : readFile(composition, loadSettingsFile(options.file)),
    options.env === undefined ? emptyReading() : readEnv(composition, options.env),
    options.argv === undefined ? emptyReading() : readArgv(composition, options.argv),
  ];
  const [, envReading] = readings as [SourceReading, SourceReading, SourceReading];
  const unknownEnv = options.unknownEnv === 'warn' ? envReading.unknown.splice(0) : [];
  const unknown = readings.flatMap((reading) => reading.unknown);
  if (unknown.length > 0) throw new UnknownSettingError(unknown);

  const invalid: InvalidSetting[] = [];
  const chosen = new Map<string, Chosen>(
    composition.settings.map((setting) => [
      setting.path,
      { value: setting.default, source: { source: 'default' }, name: setting.fileKey },
    ]),
  );
  for (const reading of readings) {
    invalid.push(...reading.invalid);
    for (const value of reading.values) {
      const checked = check(value);
      if (checked.ok) chosen.set(value.setting.path, { value: checked.value, source: value.source, name: value.name });
      else invalid.push(checked.issue);
    }
  }
  const broken = new Set(invalid.map((issue) => issue.setting));

  // `chosen` was seeded with every setting's default.
  const pick = (path: string): Chosen => chosen.get(path) as Chosen;
  const settings = nest(composition, (setting) => pick(setting.path).value);
  for (const { group, description, holds } of composition.rules) {
    const { setting, related, rule } = description;
    if (broken.has(setting) || related.some((path) => broken.has(path)) || holds(settings[group] as never)) continue;
    invalid.push({
      setting,
      ...pick(setting),
      rule,
      reason: 'the merged values break the rule',
      related: related.map((path) => ({ setting: path, ...pick(path) })),
    });
  }
  if (invalid.length > 0) throw new InvalidSettingError(invalid);

  return Object.freeze({
    settings,
    provenance: nest(composition, (setting) => pick(setting.path).source),
    ignored: Object.freeze(readings.flatMap((reading) => reading.ignored)),
    unknownEnv: Object.freeze(unknownEnv),
  });
}
