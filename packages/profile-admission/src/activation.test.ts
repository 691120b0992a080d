import { describe, expect, it } from 'vitest';
import {
  composed,
  machineCapabilities,
  type ReuseSwitches,
  settingsFor,
  vramCapabilities,
  workerOf,
  workersOf,
} from '../test/support.js';
import { activationConditions, explainActivation, explainGpuPlacement } from './activation.js';
import type { NativeCapabilities } from './admit.js';
import { builtInProfile } from './built-in.js';
import type { Profile } from './profile.js';

const qwen = builtInProfile('qwen3-0.6b-bf16-b64', { settings: composed });
const llama8b = builtInProfile('llama-3.1-8b-bf16-b64', { settings: composed });
const llama70b = builtInProfile('llama-3.1-70b-bf16-b64', { settings: composed });
const noVram = (machineCapabilities.vram as { reason: string }).reason;

interface Row {
  readonly switches: ReuseSwitches;
  /** The deployment the facts describe (its workers and seed), and whether it is declared as the profile. */
  readonly deployment: Profile;
  readonly declared: boolean;
  readonly capabilities: NativeCapabilities;
  readonly memKind?: 'dram' | 'vram';
  /** Settings that contradict the profile, to refuse it. */
  readonly extra?: readonly string[];
}

function activationOf(row: Row) {
  const { switches, deployment, declared, capabilities, memKind, extra = [] } = row;
  return explainActivation({
    composition: composed,
    settings: settingsFor(deployment, switches, extra),
    profile: declared ? deployment : undefined,
    capabilities,
    workers: workersOf(deployment, memKind),
  });
}

const on = { reuse: true, gpuReuse: true };
const reuseOnly = { reuse: true };

describe('explainActivation: the activation table', () => {
  // reuse off / on × GPU reuse off / on × profile absent / refused / admitted × vram capable or not.
  // GPU reuse on with reuse off is refused by @kvreuse/config itself (a rule between the two settings).
  const table: [string, Row, string, string[]][] = [
    [
      'reuse off, no profile',
      { switches: {}, deployment: qwen, declared: false, capabilities: machineCapabilities },
      'off',
      ['router.enable_decode_to_prefill_reuse is off'],
    ],
    [
      'reuse off, profile admitted, vram capable',
      { switches: {}, deployment: llama70b, declared: true, capabilities: vramCapabilities },
      'off',
      ['router.enable_decode_to_prefill_reuse is off'],
    ],
    [
      'reuse off, profile refused',
      { switches: {}, deployment: llama70b, declared: true, capabilities: machineCapabilities },
      'off',
      ['router.enable_decode_to_prefill_reuse is off'],
    ],
    [
      'reuse on, GPU reuse off, no profile, this machine',
      { switches: reuseOnly, deployment: qwen, declared: false, capabilities: machineCapabilities },
      'host-only',
      [
        'router.enable_decode_to_prefill_gpu_reuse is off',
        'no deployment profile is declared',
        `the native library cannot register vram: ${noVram}`,
        '0 of the 112 banks of the source workers (decode-1) are vram',
      ],
    ],
    [
      'reuse on, GPU reuse off, profile admitted, vram capable, vram sources',
      { switches: reuseOnly, deployment: llama70b, declared: true, capabilities: vramCapabilities },
      'host-only',
      ['router.enable_decode_to_prefill_gpu_reuse is off'],
    ],
    [
      'reuse on, GPU reuse off, profile refused',
      {
        switches: reuseOnly,
        deployment: qwen,
        declared: true,
        capabilities: machineCapabilities,
        extra: ['--transport-backend=loopback'],
      },
      'off',
      [
        'profile qwen3-0.6b-bf16-b64 is refused: transport.backend: expected "ucx", actual "loopback" (set by --transport-backend, KVREUSE_TRANSPORT_BACKEND or transport.backend)',
      ],
    ],
    [
      'reuse on, GPU reuse on, no profile, vram capable, vram sources',
      { switches: on, deployment: llama8b, declared: false, capabilities: vramCapabilities, memKind: 'vram' },
      'host-only',
      ['no deployment profile is declared'],
    ],
    [
      'reuse on, GPU reuse on, no profile, this machine',
      { switches: on, deployment: qwen, declared: false, capabilities: machineCapabilities },
      'host-only',
      [
        'no deployment profile is declared',
        `the native library cannot register vram: ${noVram}`,
        '0 of the 112 banks of the source workers (decode-1) are vram',
      ],
    ],
    [
      'reuse on, GPU reuse on, the 70B profile on this machine: refused with the native reason',
      { switches: on, deployment: llama70b, declared: true, capabilities: machineCapabilities },
      'off',
      [
        `profile llama-3.1-70b-bf16-b64 is refused: nativeCapabilities: expected "vram", actual ${JSON.stringify(noVram)} (the native library lacks vram)`,
      ],
    ],
    [
      'reuse on, GPU reuse on, profile admitted, this machine (host memory profile)',
      { switches: on, deployment: qwen, declared: true, capabilities: machineCapabilities },
      'host-only',
      [
        `the native library cannot register vram: ${noVram}`,
        '0 of the 112 banks of the source workers (decode-1) are vram',
      ],
    ],
    [
      'reuse on, GPU reuse on, profile admitted, vram capable, host-memory sources',
      { switches: on, deployment: llama8b, declared: true, capabilities: vramCapabilities, memKind: 'dram' },
      'host-only',
      ['0 of the 64 banks of the source workers (decode-1) are vram'],
    ],
    [
      'reuse on, GPU reuse on, profile admitted, vram capable, vram sources',
      { switches: on, deployment: llama70b, declared: true, capabilities: vramCapabilities },
      'gpu',
      [],
    ],
  ];

  it.each(table)('%s → %s', (_name, row, mode, reasons) => {
    expect(activationOf(row)).toMatchObject({ mode, reasons });
  });

  it('judges every condition, in order, whatever the mode', () => {
    const activation = activationOf({
      switches: on,
      deployment: llama70b,
      declared: true,
      capabilities: machineCapabilities,
    });
    expect(activation.conditions.map((condition) => [condition.name, condition.holds])).toEqual([
      ['reuse-setting', true],
      ['gpu-reuse-setting', true],
      ['profile-declared', true],
      ['profile-admitted', false],
      ['vram-capable', false],
      ['vram-sources', true],
    ]);
    expect(activation.conditions.map((condition) => condition.name)).toEqual([...activationConditions]);
    expect(activation.admission).toMatchObject({
      admitted: false,
      reasons: [{ field: 'nativeCapabilities', actual: noVram }],
    });
    expect(activation.conditions[5]!.detail).toBe('1280 of the 1280 banks of the source workers (decode-1) are vram');
  });

  it('counts only admitted workers as sources, naming each worker the profile refuses on its own descriptor', () => {
    const [gpuDecode] = workersOf(llama70b);
    const tp4 = workerOf({
      workerId: 'decode-tp4',
      role: 'decode',
      geometry: llama70b.geometry,
      tpSize: 4,
      memKind: 'vram',
    });
    const activation = explainActivation({
      composition: composed,
      settings: settingsFor(llama70b, on),
      profile: llama70b,
      capabilities: vramCapabilities,
      workers: [gpuDecode!, tp4],
    });
    expect(activation).toMatchObject({ mode: 'gpu', reasons: [] });
    expect(activation.conditions.find((condition) => condition.name === 'profile-admitted')).toEqual({
      name: 'profile-admitted',
      holds: true,
      detail:
        'profile llama-3.1-70b-bf16-b64 is admitted, but worker decode-tp4 is refused and never becomes ready (worker decode-tp4: roles.decode.tpSize: expected 8, actual 4)',
    });
    expect(activation.conditions.at(-1)!.detail).toBe(
      '1280 of the 1280 banks of the source workers (decode-1) are vram',
    );
  });

  it('says so when no source worker is known', () => {
    const activation = explainActivation({
      composition: composed,
      settings: settingsFor(llama70b, on),
      profile: llama70b,
      capabilities: vramCapabilities,
      workers: [],
    });
    expect(activation).toMatchObject({ mode: 'host-only', reasons: ['no source (decode) worker is known'] });
  });

  it('refuses facts without a profile key, and facts of the wrong shape', () => {
    const facts = {
      settings: settingsFor(qwen),
      composition: composed,
      capabilities: machineCapabilities,
      workers: [],
    };
    expect(() => explainActivation(facts as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'facts.profile' }),
    );
    expect(() => explainActivation({ ...facts, profile: undefined, settings: undefined as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'facts.settings' }),
    );
  });

  it('refuses reuse switches that are not booleans rather than reading "false" as on', () => {
    const settings = settingsFor(llama70b);
    const router = { ...settings.router, enableDecodeToPrefillReuse: 'false', enableDecodeToPrefillGpuReuse: 'false' };
    const facts = {
      settings: { ...settings, router } as never,
      composition: composed,
      capabilities: vramCapabilities,
      profile: llama70b,
      workers: workersOf(llama70b, 'vram'),
    };
    expect(() => explainActivation(facts)).toThrow(
      expect.objectContaining({
        code: 'INVALID_ADMISSION_INPUT',
        argument: 'facts.settings.router.enableDecodeToPrefillReuse',
        message:
          'facts.settings.router.enableDecodeToPrefillReuse = "false" is refused: must be a boolean, as resolved',
      }),
    );
    const gpuSwitch = { ...settings.router, enableDecodeToPrefillReuse: true, enableDecodeToPrefillGpuReuse: 1 };
    expect(() => explainActivation({ ...facts, settings: { ...settings, router: gpuSwitch } as never })).toThrow(
      expect.objectContaining({ argument: 'facts.settings.router.enableDecodeToPrefillGpuReuse', value: 1 }),
    );
  });
});

describe('explainGpuPlacement: may the banks go in GPU memory', () => {
  const placementOf = (switches: ReuseSwitches, profile: Profile | undefined, capabilities: NativeCapabilities) =>
    explainGpuPlacement({
      composition: composed,
      settings: settingsFor(llama70b, switches),
      profile,
      capabilities,
    });

  it('is admissible when every condition but the placement itself holds, with no worker known', () => {
    expect(placementOf(on, llama70b, vramCapabilities)).toEqual({ admissible: true, reasons: [] });
  });

  it('is not, naming each failing condition and never the vram sources it would itself provide', () => {
    expect(placementOf(on, llama70b, machineCapabilities)).toEqual({
      admissible: false,
      reasons: [
        expect.stringMatching(/^profile llama-3\.1-70b-bf16-b64 is refused: nativeCapabilities: expected "vram"/),
        `the native library cannot register vram: ${noVram}`,
      ],
    });
    expect(placementOf(reuseOnly, undefined, vramCapabilities)).toEqual({
      admissible: false,
      reasons: [
        'router.enable_decode_to_prefill_gpu_reuse is off',
        'no deployment profile is declared',
        'no deployment profile is declared, so none is admitted',
      ],
    });
  });

  it('refuses facts that are not an object, and facts of the wrong shape', () => {
    expect(() => explainGpuPlacement(undefined as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'facts' }),
    );
    expect(() =>
      explainGpuPlacement({
        composition: composed,
        settings: undefined as never,
        profile: undefined,
        capabilities: vramCapabilities,
      }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ADMISSION_INPUT', argument: 'facts.settings' }));
  });
});
