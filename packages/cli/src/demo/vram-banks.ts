// A demo rank's banks in GPU memory, when GPU reuse is admitted: allocated by the rank's agent on GPU 0
// and adopted as kvreuse's, with a host copy of each bank where the rank computes the demo's KV content
// (kv-content.ts) before the library copies the blocks it wrote up to the GPU. The host copies are only
// what the rank computed: what a transfer brings into the GPU's memory never comes back to the host (a
// vram pull is verified by the checksum kernel on both sides).
import { type Geometry, layoutRankBanks, type RankId } from '@kvreuse/descriptors';
import type { ReadinessGate } from '@kvreuse/discovery';
import type { Agent, Allocation, Capabilities, MemoryKind } from '@kvreuse/native-bindings';
import { admissionGate, declaredProfile, explainGpuPlacement } from '@kvreuse/profile-admission';
import { Bank, kvreuseOwner } from '@kvreuse/registry';
import { DemoMessageError } from '../errors.js';
import { kvreuseSettings, type Settings } from '../settings/all-settings.js';

/** The GPU whose memory holds the demo's banks (every rank on one GPU). */
export const demoGpu = 0;

/**
 * Where the ranks' banks go: GPU memory when GPU reuse would be admitted once the decode worker's banks
 * are vram (`router.enable_decode_to_prefill_gpu_reuse` on, a declared profile the settings and the native
 * library's capabilities admit, vram registrable), else host memory.
 */
export function bankMemory(settings: Settings, capabilities: Capabilities): MemoryKind {
  const placement = explainGpuPlacement({
    settings,
    composition: kvreuseSettings,
    capabilities,
    profile: declaredProfile(settings, { settings: kvreuseSettings }),
  });
  return placement.admissible ? 'vram' : 'dram';
}

/** Vram banks are served, and their worker ready, only behind the profile-admission gate: the declared profile's. */
export function vramAdmissionGate(settings: Settings, capabilities: Capabilities): ReadinessGate {
  const profile = declaredProfile(settings, { settings: kvreuseSettings });
  if (profile === undefined) throw new DemoMessageError('memory', 'vram banks need a declared profile');
  return admissionGate(profile, { capabilities, settings, composition: kvreuseSettings });
}

export interface VramBanks {
  readonly banks: Bank[];
  /** The host copy of each bank, by bank number. */
  readonly hostCopies: Uint8Array[];
  /** Copies blocks `slots` of every bank from its host copy up to the GPU. */
  upload(slots: readonly number[]): void;
}

/** Runs of consecutive slots, as [first, end) pairs. */
function runsOf(slots: readonly number[]): [number, number][] {
  const sorted = [...new Set(slots)].sort((a, b) => a - b);
  const runs: [number, number][] = [];
  for (const slot of sorted) {
    const last = runs.at(-1);
    if (last !== undefined && last[1] === slot) last[1] = slot + 1;
    else runs.push([slot, slot + 1]);
  }
  return runs;
}

/** The rank's banks laid out from `geometry`, allocated in GPU `demoGpu`'s memory; a refusal frees what was allocated. */
export async function allocateVramBanks(
  agent: Agent,
  geometry: Geometry,
  rank: RankId & { readonly tpSize: number },
  blocks: number,
): Promise<VramBanks> {
  const layout = layoutRankBanks(
    geometry,
    { tpRank: rank.tpRank, ppRank: rank.ppRank, tpSize: rank.tpSize, ppSize: 1 },
    { address: 0n, blocks, memKind: 'vram', deviceId: demoGpu },
  );
  const allocations: Allocation[] = [];
  try {
    for (const bank of layout) allocations.push(agent.allocateVram(demoGpu, bank.bytes));
  } catch (error) {
    for (const allocation of allocations) await allocation.free();
    throw error;
  }
  const banks = layout.map((bank, index) => {
    const allocation = allocations[index] as Allocation;
    return Bank.adopt(
      { ...bank, tpRank: rank.tpRank, ppRank: rank.ppRank, index, address: allocation.address },
      kvreuseOwner(allocation),
    );
  });
  const hostCopies = allocations.map((allocation) => new Uint8Array(allocation.bytes));
  const upload = (slots: readonly number[]): void => {
    for (const [index, allocation] of allocations.entries()) {
      const stride = Number(layout[index]?.blockStride);
      const copy = hostCopies[index] as Uint8Array;
      for (const [first, end] of runsOf(slots)) {
        const [from, to] = [first * stride, Math.min(end * stride, copy.length)];
        if (from < to) allocation.write(copy.subarray(from, to), from);
      }
    }
  };
  return { banks, hostCopies, upload };
}
