import { geometryDigest, referenceGeometries } from '@kvreuse/descriptors';
import { composed, composedWithoutDrain } from '../test/support.js';
import { describe, expect, it } from 'vitest';
import { InvalidProfileError } from './errors.js';
import {
  checkedProfile,
  parseProfile,
  pinnedSettings,
  profileSchemaOf,
  type ProfileInput,
  safeParseProfile,
} from './profile.js';

const geometry = referenceGeometries['qwen3-0.6b'];

const valid = (): ProfileInput => ({
  schemaVersion: 1,
  name: 'my-qwen',
  version: 3,
  modelId: 'Qwen/Qwen3-0.6B',
  geometry,
  geometryDigest: geometryDigest(geometry),
  blockHash: { function: 'kvreuse.block-hash.v3', seed: 'qwen3@main' },
  roles: {
    decode: { tpSize: 2, ppSize: 1, memoryKinds: ['dram'] },
    prefill: { tpSize: 1, ppSize: 1, memoryKinds: ['dram'] },
  },
  transport: { backend: 'ucx' },
  nativeCapabilities: ['ucx'],
  settings: {
    required: { 'router.enableDecodeToPrefillReuse': true },
    forbidden: { 'drain.failedLoadPolicy': ['fail'] },
  },
});

/** Each issue as `path: rule`. */
function issuesOf(input: unknown): string[] {
  const result = safeParseProfile(input, { settings: composed });
  if (result.success) throw new Error('expected the profile to be refused');
  expect(result.error).toBeInstanceOf(InvalidProfileError);
  expect(result.error.code).toBe('INVALID_PROFILE');
  return result.error.issues.map((issue) => `${issue.path}: ${issue.rule}`);
}

describe('parseProfile', () => {
  it('returns a frozen profile with the defaults filled in', () => {
    const { nativeCapabilities: _, settings: __, ...minimal } = valid();
    const profile = parseProfile(minimal, { settings: composed });
    expect(profile).toMatchObject({
      name: 'my-qwen',
      version: 3,
      nativeCapabilities: [],
      settings: { required: {}, forbidden: {} },
    });
    expect(Object.isFrozen(profile)).toBe(true);
    expect(Object.isFrozen(profile.roles.decode!.memoryKinds)).toBe(true);
    expect(checkedProfile(profile, composed)).toBe(profile);
  });

  it('freezes a copy of pinned values, never the objects the caller passed in', () => {
    const endpoints = ['http://etcd-a:2379'];
    const fail = 'fail';
    const input = valid();
    const profile = parseProfile(
      {
        ...input,
        settings: {
          required: { 'discovery.etcdEndpoints': endpoints },
          forbidden: { 'drain.failedLoadPolicy': [fail] },
        },
      },
      { settings: composed },
    );
    expect(Object.isFrozen(endpoints)).toBe(false);
    endpoints.push('http://etcd-b:2379');
    expect(profile.settings.required['discovery.etcdEndpoints']).toEqual(['http://etcd-a:2379']);
    expect(Object.isFrozen(profile.settings.required['discovery.etcdEndpoints'])).toBe(true);
  });

  it('refuses a malformed profile with the path of every problem in one error', () => {
    const input = {
      ...valid(),
      schemaVersion: 2,
      name: 'My Qwen',
      extra: true,
      geometry: { ...geometry, numLayers: 0, dtype: 'bf17' },
      blockHash: { function: '', seed: 'has space' },
      roles: { decode: { tpSize: 2, memoryKinds: [] }, router: {} },
      transport: { backend: 'tcp' },
      nativeCapabilities: ['cuda'],
    };
    expect(issuesOf(input)).toEqual([
      'schemaVersion: Invalid input: expected 1',
      'name: must be 1–128 of a-z, 0-9, ".", "_" and "-", starting with a letter or digit',
      'geometry.numLayers: must be a positive integer below 2^31',
      "geometry.dtype: must be 'fp32', 'bf16', 'fp16', 'fp8_e4m3', 'fp8_e5m2' or 'int8'",
      'blockHash.function: Too small: expected string to have >=1 characters',
      'blockHash.seed: at most 128 printable ASCII characters, without spaces',
      'roles.decode.ppSize: Invalid input: expected number, received undefined',
      'roles.decode.memoryKinds: Too small: expected array to have >=1 items',
      'roles.router: unknown field',
      'transport.backend: Invalid option: expected one of "ucx"|"loopback"',
      'nativeCapabilities[0]: Invalid option: expected one of "vram"|"ucx"|"loopback"',
      'extra: unknown field',
    ]);
    expect(() => parseProfile(input, { settings: composed, source: 'profiles/mine.json' })).toThrow(
      /^invalid deployment profile in profiles\/mine\.json: schemaVersion = 2: /,
    );
  });

  it('refuses a description or a model id that is too long or holds control characters', () => {
    expect(issuesOf({ ...valid(), description: 'd'.repeat(1025), modelId: 'm'.repeat(257) })).toEqual([
      'description: must be at most 1024 characters',
      'modelId: must be at most 256 characters',
    ]);
    const control = 'must hold no control characters (a line break, an escape sequence)';
    expect(issuesOf({ ...valid(), description: 'fast\nreuse', modelId: '\u001b[31mQwen/Qwen3-0.6B' })).toEqual([
      `description: ${control}`,
      `modelId: ${control}`,
    ]);
    expect(issuesOf({ ...valid(), modelId: 'Qwen/\u009bQwen3' })).toEqual([`modelId: ${control}`]);
    const longest = parseProfile(
      { ...valid(), description: 'd'.repeat(1024), modelId: 'm'.repeat(256) },
      { settings: composed },
    );
    expect([longest.description?.length, longest.modelId.length]).toEqual([1024, 256]);
  });

  it('refuses a profile that declares no role', () => {
    expect(issuesOf({ ...valid(), roles: {} })).toEqual([
      'roles: must declare at least one of prefill, decode, aggregated',
    ]);
  });

  it('checks the rules between fields once the fields parse, naming each path', () => {
    const input = {
      ...valid(),
      geometryDigest: '0'.repeat(64),
      roles: {
        decode: { tpSize: 3, ppSize: 1, memoryKinds: ['dram', 'dram'] },
        prefill: { tpSize: 1, ppSize: 5, memoryKinds: ['vram'] },
      },
      nativeCapabilities: ['vram', 'vram'],
      settings: {
        required: {
          'router.enableDecodeToPrefilReuse': true,
          'router.minimumTransferPrefixBlocks': 0,
          'inventory.hashSeed': 'another-seed',
          'transport.operationTimeoutMs': 500,
        },
        forbidden: { 'transport.operationTimeoutMs': [500, 'soon'], 'frontend.nope': [1] },
      },
    };
    expect(issuesOf(input)).toEqual([
      `geometryDigest: must be the digest of geometry (geometryDigest of @kvreuse/descriptors): ${geometryDigest(geometry)}`,
      'roles.prefill.ppSize: must divide numLayers (28)',
      'roles.decode.tpSize: must divide numKvHeads (8) or be a multiple of it',
      'roles.decode.memoryKinds: lists dram twice',
      'nativeCapabilities: lists vram twice',
      'settings.required["router.enableDecodeToPrefilReuse"]: is not a setting of this process (settings are named by their code path, such as router.enableDecodeToPrefillReuse)',
      'settings.required["router.minimumTransferPrefixBlocks"]: is not a valid value of router.minimumTransferPrefixBlocks (integer ≥ 1)',
      'settings.required["inventory.hashSeed"]: contradicts blockHash.seed, which pins inventory.hashSeed to "qwen3@main"',
      'settings.forbidden["transport.operationTimeoutMs"][1]: is not a valid value of transport.operationTimeoutMs (integer > 0)',
      'settings.forbidden["transport.operationTimeoutMs"]: forbids the value 500 that settings.required["transport.operationTimeoutMs"] requires',
      'settings.forbidden["frontend.nope"]: is not a setting of this process (settings are named by their code path, such as transport.backend)',
    ]);
    expect(() => parseProfile(input, { settings: composed })).toThrow(
      /roles\.decode\.tpSize = 3: must divide numKvHeads \(8\)/,
    );
  });

  it('refuses a setting named __proto__, which the record parser would leave out without a word', () => {
    const named = JSON.parse('{ "__proto__": true, "router.enableDecodeToPrefillReuse": true }') as never;
    const forbidden = JSON.parse('{ "__proto__": [1] }') as never;
    expect(issuesOf({ ...valid(), settings: { required: named, forbidden } })).toEqual([
      'settings.required.__proto__: is not a setting of this process (settings are named by their code path, such as router.enableDecodeToPrefillReuse)',
      'settings.forbidden.__proto__: is not a setting of this process (settings are named by their code path, such as transport.backend)',
    ]);
    expect(issuesOf({ ...valid(), version: 0, settings: { required: named } })).toEqual([
      'version: Too small: expected number to be >=1',
      'settings.required.__proto__: is not a setting of this process (settings are named by their code path, such as router.enableDecodeToPrefillReuse)',
    ]);
  });

  it('gives the value found at each path', () => {
    const result = safeParseProfile(
      {
        ...valid(),
        version: 'two',
        roles: { decode: { tpSize: 2, ppSize: 1, memoryKinds: ['hbm'] } },
        extra: { deep: 1 },
      },
      { settings: composed },
    );
    expect(!result.success && result.error.issues.map(({ path, value }) => [path, value])).toEqual([
      ['version', 'two'],
      ['roles.decode.memoryKinds[0]', 'hbm'],
      ['extra', { deep: 1 }],
    ]);
  });

  it('refuses decode and prefill parallelism whose ranks cannot map onto each other', () => {
    const roles = {
      decode: { tpSize: 16, ppSize: 1, memoryKinds: ['vram'] },
      prefill: { tpSize: 24, ppSize: 1, memoryKinds: ['vram'] },
    };
    expect(issuesOf({ ...valid(), roles })).toEqual([
      'roles.prefill.tpSize: must divide roles.decode.tpSize (16) or be a multiple of it, so that decode ranks map onto prefill ranks',
    ]);
    expect(
      parseProfile(
        { ...valid(), roles: { ...roles, prefill: { ...roles.prefill, tpSize: 32 } } },
        { settings: composed },
      ).roles.prefill?.tpSize,
    ).toBe(32);
  });

  it('refuses what is not an object', () => {
    expect(issuesOf(null)).toEqual(['(root): Invalid input: expected object, received null']);
    expect(issuesOf('qwen')).toEqual(['(root): Invalid input: expected object, received string']);
  });

  it('refuses options without the settings composition with a typed error naming it, safeParseProfile too', () => {
    for (const [options, argument] of [
      [undefined, 'options'],
      [{}, 'options.settings'],
      [{ settings: { describe: 'no' } }, 'options.settings'],
    ] as const) {
      for (const parse of [parseProfile, safeParseProfile])
        expect(() => parse(valid(), options as never)).toThrow(
          expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument }),
        );
    }
    expect(() => profileSchemaOf(undefined as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'settings' }),
    );
  });

  it('re-checks a profile it did not produce', () => {
    const forged = { ...parseProfile(valid(), { settings: composed }), geometryDigest: 'f'.repeat(64) } as never;
    expect(() => checkedProfile(forged, composed)).toThrow(
      expect.objectContaining({
        code: 'INVALID_PROFILE',
        issues: [expect.objectContaining({ path: 'geometryDigest' })],
      }),
    );
  });

  it('re-checks a profile it produced for another composition against the one given', () => {
    const forDrain = parseProfile(valid(), { settings: composed });
    expect(() => checkedProfile(forDrain, composedWithoutDrain)).toThrow(
      expect.objectContaining({
        code: 'INVALID_PROFILE',
        issues: [expect.objectContaining({ path: 'settings.forbidden["drain.failedLoadPolicy"]' })],
      }),
    );
    const withoutDrain = parseProfile({ ...valid(), settings: {} }, { settings: composed });
    const rechecked = checkedProfile(withoutDrain, composedWithoutDrain);
    expect(rechecked).toEqual(withoutDrain);
    expect(checkedProfile(rechecked, composedWithoutDrain)).toBe(rechecked);
  });
});

describe('pinnedSettings', () => {
  it('lists the settings the seed and the backend imply, then the required ones, each with its profile field', () => {
    expect(pinnedSettings(parseProfile(valid(), { settings: composed }))).toEqual([
      { setting: 'inventory.hashSeed', value: 'qwen3@main', field: 'blockHash.seed' },
      { setting: 'transport.backend', value: 'ucx', field: 'transport.backend' },
      {
        setting: 'router.enableDecodeToPrefillReuse',
        value: true,
        field: 'settings.required["router.enableDecodeToPrefillReuse"]',
      },
    ]);
  });
});
