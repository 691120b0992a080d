import { z } from 'zod';
import { defineGroup, defineSettings, type SettingsOf } from '@kvreuse/config';
import { discoveryGroup } from '@kvreuse/discovery';
import { drainGroup } from '@kvreuse/drain';
import { inventoryGroup } from '@kvreuse/inventory';
import { profileGroup } from '../src/index.js';
import { loadTransport, transportGroup } from '@kvreuse/native-bindings';
import {
  assembleWorker,
  type Geometry,
  layoutRankBanks,
  type MemKind,
  parseRankPart,
  type RankPart,
  type Role,
  serializeRankPart,
  type Worker,
} from '@kvreuse/descriptors';
import type { NativeCapabilities, Profile } from '@kvreuse/profile-admission';

/**
 * The router's settings these tests name, as `@kvreuse/router` declares them (it sits above profile
 * admission): the two reuse switches, their rule, and a setting of a bounded value.
 */
const routerGroup = defineGroup('router', {
  description: 'Decode→prefill reuse, as far as these tests name it.',
  settings: {
    enableDecodeToPrefillReuse: { schema: z.boolean(), default: false, description: 'Decode→prefill reuse.' },
    enableDecodeToPrefillGpuReuse: { schema: z.boolean(), default: false, description: 'GPU reuse too.' },
    minimumTransferPrefixBlocks: {
      schema: z.int().min(1),
      default: 4,
      unit: 'blocks',
      description: 'The shortest prefix worth pulling.',
    },
  },
  rules: [
    {
      setting: 'enableDecodeToPrefillGpuReuse',
      related: ['enableDecodeToPrefillReuse'],
      rule: 'router.enable_decode_to_prefill_gpu_reuse requires router.enable_decode_to_prefill_reuse',
      why: 'GPU reuse is a kind of reuse.',
      holds: (router) => !router.enableDecodeToPrefillGpuReuse || router.enableDecodeToPrefillReuse,
    },
  ],
});

const groups = [routerGroup, transportGroup, discoveryGroup, drainGroup, inventoryGroup, profileGroup] as const;

/** The composition the tests resolve settings with and check profiles against, as a process composes its groups. */
export const composed = defineSettings(groups);
export type TestSettings = SettingsOf<typeof groups>;

/** Another process's composition: the same groups but drain's, so a profile naming a drain setting is not one of its profiles. */
export const composedWithoutDrain = defineSettings(groups.filter((group) => group !== drainGroup));

/** This machine's native library, as it reports itself (no GPU: vram is not supported). */
export const machineCapabilities: NativeCapabilities = loadTransport().capabilities();

/**
 * A library that can register vram, which this machine has not: a fake that only isolates admission
 * and activation (the layers above the native one) from the hardware.
 */
export const vramCapabilities: NativeCapabilities = { backends: ['loopback', 'ucx'], vram: { supported: true } };

export interface WorkerShape {
  readonly workerId?: string;
  readonly role: Role;
  readonly geometry: Geometry;
  readonly tpSize: number;
  readonly ppSize?: number;
  readonly memKind?: MemKind;
}

/**
 * The complete descriptor of a worker of this shape: its rank parts, parsed and assembled as readiness
 * does (no memory behind the addresses: admission never touches it).
 */
export function workerOf(shape: WorkerShape): Worker {
  const { workerId = `${shape.role}-1`, role, geometry, tpSize, ppSize = 1, memKind = 'dram' } = shape;
  const parts: RankPart[] = [];
  for (let ppRank = 0; ppRank < ppSize; ppRank++) {
    for (let tpRank = 0; tpRank < tpSize; tpRank++) {
      const parallel = { tpRank, tpSize, ppRank, ppSize, dpRank: 0 };
      const banks = layoutRankBanks(geometry, parallel, {
        address: BigInt(parts.length + 1) << 36n,
        blocks: 4,
        memKind,
      });
      const metadata = Buffer.from(`${workerId} rank ${parts.length}`).toString('base64');
      const transport = { agentName: `${workerId}-${tpRank}-${ppRank}`, generation: 1, metadata };
      // Through the wire form and back, as discovery hands parts to readiness.
      parts.push(
        parseRankPart(
          serializeRankPart({ version: 1, workerId, incarnation: 'inc-1', role, geometry, parallel, banks, transport }),
        ),
      );
    }
  }
  const assembled = assembleWorker(parts);
  if (!assembled.complete) throw new Error(`test worker ${workerId} is incomplete`);
  return assembled.worker;
}

/** The workers a profile declares, one per role, each exactly as the profile says (memory: the role's first kind). */
export function workersOf(profile: Profile, memKind?: MemKind): Worker[] {
  return (['decode', 'prefill', 'aggregated'] as const).flatMap((role) => {
    const declared = profile.roles[role];
    if (declared === undefined) return [];
    return [
      workerOf({
        role,
        geometry: profile.geometry,
        tpSize: declared.tpSize,
        ppSize: declared.ppSize,
        memKind: memKind ?? declared.memoryKinds[0]!,
      }),
    ];
  });
}

export interface ReuseSwitches {
  readonly reuse?: boolean;
  readonly gpuReuse?: boolean;
}

/** Settings resolved from flags, as a process started with them has them: the profile's seed and backend, the reuse switches, then `extra` (which replaces a flag given before). */
export function settingsFor(
  profile: Profile,
  switches: ReuseSwitches = {},
  extra: readonly string[] = [],
): TestSettings {
  const argv = [`--inventory-hash-seed=${profile.blockHash.seed}`, `--transport-backend=${profile.transport.backend}`];
  if (switches.reuse === true) argv.push('--router-enable-decode-to-prefill-reuse');
  if (switches.gpuReuse === true) argv.push('--router-enable-decode-to-prefill-gpu-reuse');
  const flagOf = (argument: string): string => argument.split('=')[0]!;
  const overridden = new Set(extra.map(flagOf));
  return composed.resolve({ argv: [...argv.filter((argument) => !overridden.has(flagOf(argument))), ...extra] })
    .settings;
}
