import { isDeepStrictEqual } from 'node:util';
import { type GroupDescription, type SettingDescription } from '@kvreuse/config';
import { inventoryGroup } from '@kvreuse/inventory';
import {
  geometryDigest,
  geometrySchema,
  memKinds,
  type Role,
  roles,
  shardSplitIssue,
  transportBackends,
} from '@kvreuse/descriptors';
import { z } from 'zod';
import { InvalidAdmissionInputError, InvalidProfileError, type ProfileIssue } from './errors.js';

/** The profile schema versions this package reads. */
export const profileSchemaVersions = [1] as const;

/** Native capabilities a profile may require: GPU memory registration, or a transport backend built in. */
export const nativeCapabilityNames = ['vram', ...transportBackends] as const;
export type NativeCapabilityName = (typeof nativeCapabilityNames)[number];

const positiveInteger = z
  .int()
  .min(1)
  .max(2 ** 31 - 1);

const roleSchema = z.strictObject({
  tpSize: positiveInteger,
  ppSize: positiveInteger,
  /** Where this role's KV banks may live: `dram` (host memory) and/or `vram` (GPU memory). */
  memoryKinds: z.array(z.enum(memKinds)).min(1),
});

/**
 * The settings a profile may name: the process's composition of groups (`defineSettings(groups)` of
 * `@kvreuse/config`), whose settings `settings.required` and `settings.forbidden` are checked against.
 */
export interface SettingsComposition {
  describe(): readonly GroupDescription[];
}

/** The composition a profile's settings are checked against. */
export interface ProfileSettingsOptions {
  readonly settings: SettingsComposition;
}

/** How a profile is parsed: the composition its settings are checked against, and where it was read from. */
export interface ParseProfileOptions extends ProfileSettingsOptions {
  /** The file or name the profile came from, for the error. */
  readonly source?: string;
}

/** Refuses what is not a settings composition with `InvalidAdmissionInputError`, naming the argument. */
export function checkComposition(composition: SettingsComposition, argument: string): void {
  if (typeof composition !== 'object' || composition === null || typeof composition.describe !== 'function') {
    throw new InvalidAdmissionInputError(
      argument,
      composition,
      'must be the settings composition (defineSettings of @kvreuse/config)',
    );
  }
}

/** Refuses options without the composition a profile is checked against, naming what is missing. */
export function checkProfileOptions(options: ProfileSettingsOptions): void {
  if (typeof options !== 'object' || options === null)
    throw new InvalidAdmissionInputError('options', options, 'must be { settings }: the settings composition');
  checkComposition(options.settings, 'options.settings');
}

type SettingsByPath = ReadonlyMap<string, SettingDescription>;

const settingsByComposition = new WeakMap<SettingsComposition, SettingsByPath>();

function settingsByPath(composition: SettingsComposition): SettingsByPath {
  let byPath = settingsByComposition.get(composition);
  if (byPath === undefined) {
    byPath = new Map(
      composition.describe().flatMap((group) => group.settings.map((setting) => [setting.path, setting])),
    );
    settingsByComposition.set(composition, byPath);
  }
  return byPath;
}

/** Words a profile shows an operator: one line of text, without control characters (C0, DEL, C1). */
const shownText = (maxLength: number) =>
  z
    .string()
    .max(maxLength, `must be at most ${maxLength} characters`)
    .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/, 'must hold no control characters (a line break, an escape sequence)');

const profileFields = z.strictObject({
  schemaVersion: z.literal(profileSchemaVersions),
  /** How operators name it (`profile.name`): lowercase letters, digits, `.`, `_` and `-`. */
  name: z
    .string()
    .regex(
      /^[a-z0-9][a-z0-9._-]{0,127}$/,
      'must be 1–128 of a-z, 0-9, ".", "_" and "-", starting with a letter or digit',
    ),
  /** The profile's own revision, raised whenever its content changes. */
  version: positiveInteger,
  description: shownText(1024).optional(),
  /** The model served, as its hub names it (`Qwen/Qwen3-0.6B`). */
  modelId: shownText(256).min(1),
  geometry: geometrySchema,
  /** `geometryDigest(geometry)` of `@kvreuse/descriptors`: stated so that a reader sees which digest workers must publish. */
  geometryDigest: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits'),
  blockHash: z.strictObject({
    /** The block hash function every worker and router hashes with (`blockHashFunction` of `@kvreuse/inventory`). */
    function: z.string().min(1),
    /** The `inventory.hash_seed` every worker and router of this deployment uses. */
    seed: inventoryGroup.settings.hashSeed.schema,
  }),
  /** The roles of the deployment, each with its parallelism and the memory its banks may live in. */
  roles: z
    .strictObject({
      prefill: roleSchema.optional(),
      decode: roleSchema.optional(),
      aggregated: roleSchema.optional(),
    })
    .refine(
      (declared) => Object.values(declared).some((role) => role !== undefined),
      'must declare at least one of prefill, decode, aggregated',
    ),
  transport: z.strictObject({ backend: z.enum(transportBackends) }),
  nativeCapabilities: z.array(z.enum(nativeCapabilityNames)).default([]),
  settings: z
    .strictObject({
      /** Settings that must have exactly these values, by their code path (`router.enableDecodeToPrefillReuse`). */
      required: z.record(z.string(), z.unknown()).default({}),
      /** Settings that must not have any of these values. */
      forbidden: z.record(z.string(), z.array(z.unknown()).min(1)).default({}),
    })
    .default({ required: {}, forbidden: {} }),
});

export type Profile = z.output<typeof profileFields>;
/** A profile as written in a file. */
export type ProfileInput = z.input<typeof profileFields>;

const schemasByComposition = new WeakMap<SettingsComposition, z.ZodType<Profile, ProfileInput>>();

/**
 * The schema of a declared deployment profile, schema version 1 (see the package README for every field),
 * with its rules; the settings it pins or forbids are those of `settings`.
 */
export function profileSchemaOf(settings: SettingsComposition): z.ZodType<Profile, ProfileInput> {
  checkComposition(settings, 'settings');
  let schema = schemasByComposition.get(settings);
  if (schema === undefined) {
    const byPath = settingsByPath(settings);
    // The rules between fields read parsed values, so they wait until every field has parsed.
    schema = profileFields.superRefine(
      (profile, ctx) => {
        for (const { path, value, message } of profileRuleViolations(profile, byPath))
          ctx.addIssue({ code: 'custom', path, message, input: value });
      },
      { when: (payload) => payload.issues.length === 0 },
    );
    schemasByComposition.set(settings, schema);
  }
  return schema;
}
export type ProfileRole = z.output<typeof roleSchema>;

/** The roles a profile declares, in a fixed order, with their declarations. */
export function declaredRoles(profile: Profile): { role: Role; declaration: ProfileRole }[] {
  return roles.flatMap((role) => {
    const declaration = profile.roles[role];
    return declaration === undefined ? [] : [{ role, declaration }];
  });
}

/**
 * How a user sets a setting, in the words they type: `set by --inventory-hash-seed,
 * KVREUSE_INVENTORY_HASH_SEED or inventory.hash_seed`; its code path when the composition does not hold it.
 */
export function howToSet(composition: SettingsComposition, path: string): string {
  const setting = settingsByPath(composition).get(path);
  return setting === undefined ? `setting ${path}` : `set by ${setting.flag}, ${setting.env} or ${setting.fileKey}`;
}

/** A setting a profile pins, the value it must have, and the profile field that says so. */
export interface PinnedSetting {
  /** Its code path: `router.enableDecodeToPrefillReuse`. */
  readonly setting: string;
  readonly value: unknown;
  readonly field: string;
}

/**
 * Every setting the profile fixes: those its other fields imply (`blockHash.seed` is
 * `inventory.hashSeed`, `transport.backend` is `transport.backend`), then `settings.required`.
 */
export function pinnedSettings(profile: Profile): PinnedSetting[] {
  const implied: PinnedSetting[] = [
    { setting: 'inventory.hashSeed', value: profile.blockHash.seed, field: 'blockHash.seed' },
    { setting: 'transport.backend', value: profile.transport.backend, field: 'transport.backend' },
  ];
  const required = Object.entries(profile.settings.required).map(([setting, value]) => ({
    setting,
    value,
    field: settingField('required', setting),
  }));
  return [...implied, ...required];
}

/** The profile field of a required or forbidden setting: `settings.required["router.enableDecodeToPrefillReuse"]`. */
export function settingField(list: 'required' | 'forbidden', setting: string): string {
  return `settings.${list}[${JSON.stringify(setting)}]`;
}

interface RuleViolation {
  readonly path: PropertyKey[];
  readonly value: unknown;
  readonly message: string;
}

function profileRuleViolations(profile: Profile, byPath: SettingsByPath): RuleViolation[] {
  const violations: RuleViolation[] = [];
  const report = (path: PropertyKey[], value: unknown, message: string): void => {
    violations.push({ path, value, message });
  };
  const digest = geometryDigest(profile.geometry);
  if (profile.geometryDigest !== digest)
    report(
      ['geometryDigest'],
      profile.geometryDigest,
      `must be the digest of geometry (geometryDigest of @kvreuse/descriptors): ${digest}`,
    );
  for (const { role, declaration } of declaredRoles(profile)) {
    const issue = shardSplitIssue(profile.geometry, declaration);
    if (issue !== undefined) report(['roles', role, issue.field.replace('parallel.', '')], issue.value, issue.rule);
    const repeated = declaration.memoryKinds.find((kind, index) => declaration.memoryKinds.indexOf(kind) !== index);
    if (repeated !== undefined)
      report(['roles', role, 'memoryKinds'], declaration.memoryKinds, `lists ${repeated} twice`);
  }
  const { decode, prefill } = profile.roles;
  if (
    decode !== undefined &&
    prefill !== undefined &&
    Math.max(decode.tpSize, prefill.tpSize) % Math.min(decode.tpSize, prefill.tpSize) !== 0
  ) {
    // checkCompatibility of @kvreuse/descriptors refuses such a pair (TP_SIZES_NOT_DIVISIBLE): no decode worker could serve a prefill worker.
    report(
      ['roles', 'prefill', 'tpSize'],
      prefill.tpSize,
      `must divide roles.decode.tpSize (${decode.tpSize}) or be a multiple of it, so that decode ranks map onto prefill ranks`,
    );
  }
  const repeatedCapability = profile.nativeCapabilities.find(
    (name, index) => profile.nativeCapabilities.indexOf(name) !== index,
  );
  if (repeatedCapability !== undefined)
    report(['nativeCapabilities'], profile.nativeCapabilities, `lists ${repeatedCapability} twice`);
  violations.push(...settingsRuleViolations(profile, byPath));
  return violations;
}

/** The rule a name in `settings.required` or `settings.forbidden` breaks when no setting of the composition has it. */
function notASetting(list: 'required' | 'forbidden'): string {
  const example = list === 'required' ? 'router.enableDecodeToPrefillReuse' : 'transport.backend';
  return `is not a setting of this process (settings are named by their code path, such as ${example})`;
}

/** The rules of the pinned and forbidden settings: known settings, valid values, no contradicting pins. */
function settingsRuleViolations(profile: Profile, byPath: SettingsByPath): RuleViolation[] {
  const violations: RuleViolation[] = [];
  const report = (path: PropertyKey[], value: unknown, message: string): void => {
    violations.push({ path, value, message });
  };
  const pinned = new Map<string, PinnedSetting>();
  for (const entry of pinnedSettings(profile)) {
    const list = entry.field.startsWith('settings.') ? ['settings', 'required', entry.setting] : [];
    const setting = byPath.get(entry.setting);
    if (setting === undefined) {
      report(list, entry.value, notASetting('required'));
      continue;
    }
    const parsed = setting.schema.safeParse(entry.value);
    if (!parsed.success) report(list, entry.value, `is not a valid value of ${entry.setting} (${setting.type})`);
    const earlier = pinned.get(entry.setting);
    if (earlier !== undefined && !isDeepStrictEqual(earlier.value, entry.value)) {
      report(
        list,
        entry.value,
        `contradicts ${earlier.field}, which pins ${entry.setting} to ${JSON.stringify(earlier.value)}`,
      );
    }
    if (earlier === undefined) pinned.set(entry.setting, entry);
  }
  for (const [name, values] of Object.entries(profile.settings.forbidden)) {
    const setting = byPath.get(name);
    if (setting === undefined) {
      report(['settings', 'forbidden', name], values, notASetting('forbidden'));
      continue;
    }
    values.forEach((value, index) => {
      if (!setting.schema.safeParse(value).success)
        report(['settings', 'forbidden', name, index], value, `is not a valid value of ${name} (${setting.type})`);
    });
    const required = pinned.get(name);
    if (required !== undefined && values.some((value) => isDeepStrictEqual(value, required.value))) {
      report(
        ['settings', 'forbidden', name],
        values,
        `forbids the value ${JSON.stringify(required.value)} that ${required.field} requires`,
      );
    }
  }
  return violations;
}

const pathOf = (path: readonly PropertyKey[]): string => (path.length === 0 ? '(root)' : z.core.toDotPath(path));

/** Every issue as the path of the problem (`roles.decode.tpSize`, `settings.required["router.x"]`), its value and the rule. */
function profileIssues(error: z.ZodError): ProfileIssue[] {
  return error.issues.flatMap((issue) =>
    // An unrecognized key is reported on its parent object; name each key itself.
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => ({
          path: pathOf([...issue.path, key]),
          value: (issue.input as Record<string, unknown>)[key],
          rule: 'unknown field',
        }))
      : [{ path: pathOf(issue.path), value: issue.input, rule: issue.message }],
  );
}

const isPlainRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * A setting named `__proto__` in `settings.required` or `settings.forbidden`, refused as a name no
 * setting has: zod's records leave that key out of what they parse without a word.
 */
function protoSettingIssues(input: unknown): ProfileIssue[] {
  const settings = isPlainRecord(input) ? input['settings'] : undefined;
  return (['required', 'forbidden'] as const).flatMap((list) => {
    const named = isPlainRecord(settings) ? settings[list] : undefined;
    if (!isPlainRecord(named) || !Object.hasOwn(named, '__proto__')) return [];
    return [{ path: pathOf(['settings', list, '__proto__']), value: named['__proto__'], rule: notASetting(list) }];
  });
}

/** A frozen copy of the arrays and plain objects in `value`: the parser passes pinned values through as given. */
function frozenCopy<T>(value: T): T {
  if (Array.isArray(value)) return Object.freeze(value.map(frozenCopy)) as T;
  if (typeof value !== 'object' || value === null) return value;
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  const entries = Object.entries(value).map(([key, child]) => [key, frozenCopy(child)] as const);
  return Object.freeze(Object.fromEntries(entries)) as T;
}

/**
 * Every profile the parser produced, with the composition it was checked against: frozen, so it still
 * holds what was checked, but only against that composition's settings.
 */
const checkedAgainst = new WeakMap<Profile, SettingsComposition>();

export type SafeParseProfileResult =
  { readonly success: true; readonly data: Profile } | { readonly success: false; readonly error: InvalidProfileError };

/**
 * Checks a profile against the schema and its rules (the digest is its geometry's, each role's split
 * divides the geometry, every pinned setting exists and has a valid value, nothing is both required and
 * forbidden). The profile returned is frozen; the error lists the path of every problem. Options without
 * the composition are a programmer error, thrown (`InvalidAdmissionInputError`).
 */
export function safeParseProfile(input: unknown, options: ParseProfileOptions): SafeParseProfileResult {
  checkProfileOptions(options);
  const result = profileSchemaOf(options.settings).safeParse(input, { reportInput: true });
  const issues = [...(result.success ? [] : profileIssues(result.error)), ...protoSettingIssues(input)];
  if (!result.success || issues.length > 0)
    return { success: false, error: new InvalidProfileError(issues, options.source) };
  const profile = frozenCopy(result.data);
  checkedAgainst.set(profile, options.settings);
  return { success: true, data: profile };
}

/** `safeParseProfile` that throws its `InvalidProfileError`. */
export function parseProfile(input: unknown, options: ParseProfileOptions): Profile {
  const result = safeParseProfile(input, options);
  if (!result.success) throw result.error;
  return result.data;
}

/**
 * `profile` itself when the parser produced it for `settings`; otherwise (another composition's profile,
 * or one made by hand) it is checked like any input against `settings` (throws `InvalidProfileError`).
 */
export function checkedProfile(profile: Profile, settings: SettingsComposition): Profile {
  return checkedAgainst.get(profile) === settings ? profile : parseProfile(profile, { settings });
}
