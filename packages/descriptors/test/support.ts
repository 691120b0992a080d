import { type Geometry, layoutRankBanks, type RankPart, type Role, assembleWorker, type Worker } from '../src/index.js';

export interface WorkerSpec {
  readonly geometry: Geometry;
  readonly tpSize: number;
  readonly ppSize: number;
  readonly blocks: number;
  readonly role?: Role;
  readonly workerId?: string;
  /** Where the first rank's banks start; each rank gets its own 64 GiB window after it. */
  readonly baseAddress?: bigint;
  /** Extra bytes per block beyond the minimum stride. */
  readonly stridePadding?: number;
  /** Plane-strided layer-separate banks (version 2 parts); `blockStride` then defaults to `layoutRankBanks`'s. */
  readonly planeStride?: number;
  readonly blockStride?: number;
}

/** The rank parts of one worker, laid out with `layoutRankBanks`, in (pp, tp) order. */
export function rankPartsFor(spec: WorkerSpec): RankPart[] {
  const {
    geometry,
    tpSize,
    ppSize,
    blocks,
    role = 'decode',
    workerId = `${role}-worker`,
    baseAddress = 0x7f00_0000_0000n,
  } = spec;
  const parts: RankPart[] = [];
  for (let ppRank = 0; ppRank < ppSize; ppRank++) {
    for (let tpRank = 0; tpRank < tpSize; tpRank++) {
      const parallel = { tpRank, tpSize, ppRank, ppSize, dpRank: 0 };
      const rankIndex = ppRank * tpSize + tpRank;
      const { planeStride } = spec;
      const minimum =
        layoutRankBanks(geometry, parallel, {
          address: 0n,
          blocks: 1,
          ...(planeStride === undefined ? {} : { planeStride }),
        })[0]?.blockStride ?? 0n;
      const banks = layoutRankBanks(geometry, parallel, {
        address: baseAddress + BigInt(rankIndex) * 2n ** 36n,
        blocks,
        blockStride: spec.blockStride ?? Number(minimum) + (spec.stridePadding ?? 0),
        ...(planeStride === undefined ? {} : { planeStride }),
      });
      parts.push({
        version: planeStride === undefined ? 1 : 2,
        workerId,
        incarnation: `${workerId}-incarnation`,
        role,
        geometry,
        parallel,
        banks,
        transport: { agentName: `${workerId}-tp${tpRank}-pp${ppRank}`, generation: 1, metadata: '' },
      });
    }
  }
  return parts;
}

export function workerFor(spec: WorkerSpec): Worker {
  const result = assembleWorker(rankPartsFor(spec));
  if (!result.complete) throw new Error(`test worker is incomplete: ${JSON.stringify(result)}`);
  return result.worker;
}
