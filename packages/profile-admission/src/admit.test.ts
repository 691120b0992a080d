import { describe, expect, it } from 'vitest';
import {
  composed,
  composedWithoutDrain,
  machineCapabilities,
  settingsFor,
  vramCapabilities,
  workerOf,
  workersOf,
} from '../test/support.js';
import type { Worker } from '@kvreuse/descriptors';
import { admit, type AdmissionFacts } from './admit.js';
import { builtInProfile, builtInProfiles } from './built-in.js';
import { parseProfile, type Profile } from './profile.js';

const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed });
const llama8b16 = builtInProfile('llama-3.1-8b-bf16-b16', { settings: composed });
const llama8b64 = builtInProfile('llama-3.1-8b-bf16-b64', { settings: composed });
const llama70b = builtInProfile('llama-3.1-70b-bf16-b64', { settings: composed });

const factsFor = (profile: Profile, overrides: Partial<AdmissionFacts> = {}): AdmissionFacts => ({
  workers: workersOf(profile),
  capabilities: machineCapabilities,
  settings: settingsFor(profile),
  composition: composed,
  ...overrides,
});

/** The reasons of a refusal as `field: expected → actual`, and checks that each message says the same. */
function refusals(profile: Profile, facts: AdmissionFacts): string[] {
  const result = admit(profile, facts);
  if (result.admitted) throw new Error('expected a refusal');
  return result.reasons.map((reason) => {
    expect(reason.message).toContain(`${reason.field}: expected `);
    return `${reason.workerId ?? '*'} ${reason.field}: ${JSON.stringify(reason.expected)} → ${JSON.stringify(reason.actual)}`;
  });
}

describe('admit: the admitted path of every built-in profile this machine can run', () => {
  const runnable = builtInProfiles({ settings: composed }).filter(
    (profile) => profile.name !== 'llama-3.1-70b-bf16-b64',
  );

  it.each(runnable.map((profile) => [profile.name, profile] as const))(
    'admits %s with its workers in host memory on this machine',
    (_name, profile) => {
      expect(machineCapabilities.vram.supported).toBe(false);
      expect(admit(profile, factsFor(profile, { workers: workersOf(profile, 'dram') }))).toEqual({ admitted: true });
    },
  );

  it('admits llama-3.1-70b-bf16-b64 only where the native library registers vram (a stand-in library here)', () => {
    expect(admit(llama70b, factsFor(llama70b, { capabilities: vramCapabilities }))).toEqual({ admitted: true });
  });
});

describe('admit: every refusal names the profile field, the expected and the actual value', () => {
  // This kind of machine has no NVIDIA driver: the native library, which loads libcuda.so.1 at run time,
  // says so as its reason, with the loader's own words after it.
  const noVramReason = (machineCapabilities.vram as { reason: string }).reason;

  it('takes the native library’s reason on this machine: no driver library', () => {
    expect(noVramReason).toMatch(/^no: no driver library: libcuda\.so\.1 could not be loaded \(/);
  });

  it('refuses llama-3.1-70b-bf16-b64 on this machine with the native library’s own reason, for the profile and for each worker’s vram', () => {
    const reasons = refusals(llama70b, factsFor(llama70b));
    expect(reasons).toEqual([
      `* nativeCapabilities: "vram" → ${JSON.stringify(machineCapabilities.vram.supported ? '' : machineCapabilities.vram.reason)}`,
    ]);
    const result = admit(llama70b, factsFor(llama70b));
    expect(!result.admitted && result.reasons[0]!.message).toBe(
      `nativeCapabilities: expected "vram", actual "${noVramReason}" (the native library lacks vram)`,
    );
  });

  it('refuses vram banks the profile allows when the native library cannot register them', () => {
    const facts = factsFor(llama8b64, { workers: workersOf(llama8b64, 'vram') });
    expect(refusals(llama8b64, facts)).toEqual([
      `decode-1 roles.decode.memoryKinds: "vram" → ${JSON.stringify((machineCapabilities.vram as { reason: string }).reason)}`,
      `prefill-1 roles.prefill.memoryKinds: "vram" → ${JSON.stringify((machineCapabilities.vram as { reason: string }).reason)}`,
    ]);
    const result = admit(llama8b64, facts);
    expect(!result.admitted && result.reasons[0]!.message).toBe(
      `worker decode-1: roles.decode.memoryKinds: expected vram the native library can register, actual "${noVramReason}" (64 vram banks, the first bank 0 of rank (tp 0, pp 0))`,
    );
  });

  it('refuses banks in memory the role does not allow, counting them', () => {
    const decode = { ...qwen.roles.decode!, memoryKinds: ['dram' as const] };
    const onHost = { ...qwen, roles: { ...qwen.roles, decode } };
    const worker = workerOf({ role: 'decode', geometry: qwen.geometry, tpSize: 2, memKind: 'vram' });
    const result = admit(onHost, factsFor(onHost, { workers: [worker], capabilities: vramCapabilities }));
    expect(result).toEqual({
      admitted: false,
      reasons: [
        {
          field: 'roles.decode.memoryKinds',
          expected: ['dram'],
          actual: 'vram',
          workerId: 'decode-1',
          message:
            'worker decode-1: roles.decode.memoryKinds: expected ["dram"], actual "vram" (112 vram banks, the first bank 0 of rank (tp 0, pp 0))',
        },
      ],
    });
  });

  it('fails closed on the block hash: another function or another seed never matches', () => {
    expect(refusals(qwen, factsFor(qwen, { blockHashFunction: 'kvreuse.block-hash.v1' }))).toEqual([
      '* blockHash.function: "kvreuse.block-hash.v3" → "kvreuse.block-hash.v1"',
    ]);
    expect(
      refusals(qwen, factsFor(qwen, { settings: settingsFor(qwen, {}, ['--inventory-hash-seed=qwen3@other']) })),
    ).toEqual(['* blockHash.seed: "" → "qwen3@other"']);
  });

  it('fails closed on the block size and the layout, naming each differing geometry field', () => {
    const b16 = workerOf({ role: 'decode', geometry: llama8b16.geometry, tpSize: 1 });
    expect(refusals(llama8b64, factsFor(llama8b64, { workers: [b16] }))).toEqual([
      'decode-1 geometry.blockTokens: 64 → 16',
    ]);
    const nhd = workerOf({
      role: 'decode',
      geometry: { ...qwen.geometry, bankLayout: 'fully-contiguous', headOrder: 'NHD' },
      tpSize: 2,
    });
    expect(refusals(qwen, factsFor(qwen, { workers: [nhd] }))).toEqual([
      'decode-1 geometry.bankLayout: "layer-separate" → "fully-contiguous"',
      'decode-1 geometry.headOrder: "HND" → "NHD"',
    ]);
    const llama = workerOf({ role: 'decode', geometry: llama8b64.geometry, tpSize: 2 });
    expect(refusals(qwen, factsFor(qwen, { workers: [llama] }))).toEqual(['decode-1 geometry.numLayers: 28 → 32']);
  });

  it('judges a worker by what its rank parts say: one that states other facts is refused, never admitted', () => {
    const [decode] = workersOf(qwen);
    const facts = factsFor(qwen);
    const refused = (worker: object, argument: string, message: string) =>
      expect(() => admit(qwen, { ...facts, workers: [worker as Worker] })).toThrow(
        expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument, message }),
      );
    // Parts laid out for 16-token blocks, stating the profile's 64: its banks would be read as 64-token blocks.
    const b16 = workerOf({ role: 'decode', geometry: { ...qwen.geometry, blockTokens: 16 }, tpSize: 2 });
    refused(
      { ...b16, geometry: qwen.geometry, geometryDigest: qwen.geometryDigest },
      'facts.workers[0].geometry',
      expect.stringMatching(/^facts\.workers\[0\]\.geometry = .* is refused: must be \{.*"blockTokens":16,/),
    );
    refused(
      { ...decode!, geometryDigest: '0'.repeat(64) },
      'facts.workers[0].geometryDigest',
      `facts.workers[0].geometryDigest = "${'0'.repeat(64)}" is refused: must be "${qwen.geometryDigest}", as its rank parts say`,
    );
    // A role of no profile field: it read Object.prototype.toString as the role's declaration.
    refused(
      { ...decode!, role: 'toString' },
      'facts.workers[0].role',
      'facts.workers[0].role = "toString" is refused: must be "decode", as its rank parts say',
    );
    refused(
      { ...decode!, ranks: decode!.ranks.slice(1) },
      'facts.workers[0].ranks',
      expect.stringContaining('must be every rank part of one worker, once'),
    );
    refused(
      { ...decode!, ranks: [{ ...decode!.ranks[0]!, banks: 'none' }, decode!.ranks[1]] },
      'facts.workers[0].ranks',
      expect.stringContaining('is refused: must be valid rank parts (parseRankPart)'),
    );
  });

  it('refuses a role the profile does not declare, and a parallelism it does not state', () => {
    const aggregated = workerOf({ role: 'aggregated', geometry: qwen.geometry, tpSize: 1 });
    const tp4 = workerOf({ workerId: 'decode-tp4', role: 'decode', geometry: qwen.geometry, tpSize: 4 });
    const pp2 = workerOf({ workerId: 'prefill-pp2', role: 'prefill', geometry: qwen.geometry, tpSize: 1, ppSize: 2 });
    expect(refusals(qwen, factsFor(qwen, { workers: [aggregated, tp4, pp2] }))).toEqual([
      'aggregated-1 roles: ["prefill","decode"] → "aggregated"',
      'decode-tp4 roles.decode.tpSize: 2 → 4',
      'prefill-pp2 roles.prefill.ppSize: 1 → 2',
    ]);
  });

  it('refuses a transport backend other than the profile’s, or one the library is built without', () => {
    expect(
      refusals(qwen, factsFor(qwen, { settings: settingsFor(qwen, {}, ['--transport-backend=loopback']) })),
    ).toEqual(['* transport.backend: "ucx" → "loopback"']);
    expect(
      refusals(qwen, factsFor(qwen, { capabilities: { backends: ['loopback'], vram: machineCapabilities.vram } })),
    ).toEqual(['* transport.backend: "ucx" → ["loopback"]', '* nativeCapabilities: "ucx" → "backends loopback"']);
  });

  it('refuses settings the profile requires with other values, and settings it forbids', () => {
    const strict = parseProfile(
      {
        ...qwen,
        name: 'qwen-strict',
        settings: {
          required: { 'router.enableDecodeToPrefillReuse': true, 'discovery.backend': 'etcd' },
          forbidden: { 'drain.failedLoadPolicy': ['fail'] },
        },
      },
      { settings: composed },
    );
    const settings = settingsFor(strict, {}, ['--drain-failed-load-policy=fail']);
    expect(refusals(strict, factsFor(strict, { settings }))).toEqual([
      '* settings.required["router.enableDecodeToPrefillReuse"]: true → false',
      '* settings.required["discovery.backend"]: "etcd" → "sqlite"',
      '* settings.forbidden["drain.failedLoadPolicy"]: ["fail"] → "fail"',
    ]);
    const result = admit(strict, factsFor(strict, { settings }));
    expect(!result.admitted && result.reasons[2]!.message).toBe(
      'settings.forbidden["drain.failedLoadPolicy"]: expected none of ["fail"], actual "fail" (set by --drain-failed-load-policy, KVREUSE_DRAIN_FAILED_LOAD_POLICY or drain.failed_load_policy)',
    );
    const met = settingsFor(strict, { reuse: true }, ['--discovery-backend=etcd']);
    expect(admit(strict, factsFor(strict, { settings: met }))).toEqual({ admitted: true });
  });

  it('checks a profile parsed for another composition against the facts’ composition', () => {
    const forbidsDrain = parseProfile(
      { ...qwen, name: 'qwen-no-fail', settings: { forbidden: { 'drain.failedLoadPolicy': ['fail'] } } },
      { settings: composed },
    );
    expect(() => admit(forbidsDrain, factsFor(forbidsDrain, { composition: composedWithoutDrain }))).toThrow(
      expect.objectContaining({
        code: 'INVALID_PROFILE',
        issues: [expect.objectContaining({ path: 'settings.forbidden["drain.failedLoadPolicy"]' })],
      }),
    );
  });

  it('reports every contradiction at once, process-wide ones first', () => {
    const b16 = workerOf({ role: 'decode', geometry: llama8b16.geometry, tpSize: 2 });
    const settings = settingsFor(llama8b64, {}, ['--inventory-hash-seed=llama']);
    expect(refusals(llama8b64, factsFor(llama8b64, { workers: [b16], settings }))).toEqual([
      '* blockHash.seed: "" → "llama"',
      'decode-1 roles.decode.tpSize: 1 → 2',
      'decode-1 geometry.blockTokens: 64 → 16',
    ]);
  });

  it('refuses facts of the wrong shape with a typed error naming the argument', () => {
    const facts = factsFor(qwen);
    const refused = (argument: string) => expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument });
    expect(() => admit(qwen, undefined as never)).toThrow(refused('facts'));
    expect(() => admit(qwen, { ...facts, workers: undefined as never })).toThrow(refused('facts.workers'));
    expect(() => admit(qwen, { ...facts, workers: [{}] as never })).toThrow(refused('facts.workers[0]'));
    expect(() => admit(qwen, { ...facts, capabilities: { backends: ['ucx'] } as never })).toThrow(
      refused('facts.capabilities'),
    );
    for (const capabilities of [
      { backends: ['ucx'], vram: { supported: false } },
      { backends: ['ucx', 7], vram: { supported: true } },
    ]) {
      expect(() => admit(qwen, { ...facts, capabilities: capabilities as never })).toThrow(
        refused('facts.capabilities'),
      );
    }
    expect(() => admit(qwen, { ...facts, settings: { router: {} } as never })).toThrow(refused('facts.settings'));
    expect(() => admit(qwen, { ...facts, composition: undefined as never })).toThrow(refused('facts.composition'));
    expect(() => admit(qwen, { ...facts, blockHashFunction: 2 as never })).toThrow(refused('facts.blockHashFunction'));
    expect(() => admit({ ...qwen, geometryDigest: 'x' } as never, facts)).toThrow(
      expect.objectContaining({ code: 'INVALID_PROFILE' }),
    );
  });
});
