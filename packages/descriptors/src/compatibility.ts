import type { Geometry } from './geometry.js';
import type { IncompatibilityCode, IncompatibilityReason } from './incompatibility.js';
import type { RankId } from './rank-id.js';
import { deriveShard, type IndexRange } from './shard.js';
import type { RankPart } from './rank-part.js';
import { checkedWorkerRanks, type Worker } from './worker.js';

/** One rank pair of a transfer: which KV heads and layers (global indices) the source rank supplies. */
export interface RankRoute {
  readonly sourceRank: RankId;
  readonly destinationRank: RankId;
  readonly kvHeads: IndexRange;
  readonly layers: IndexRange;
}

export interface TransferMapping {
  /** Every destination rank's heads and layers, each supplied by exactly one route; by destination rank, then source rank. */
  readonly routes: readonly RankRoute[];
}

export type CompatibilityResult =
  | { readonly ok: true; readonly mapping: TransferMapping }
  | { readonly ok: false; readonly reasons: readonly IncompatibilityReason[] };

const matchingGeometry: readonly { field: keyof Geometry; code: IncompatibilityCode }[] = [
  { field: 'numLayers', code: 'NUM_LAYERS_MISMATCH' },
  { field: 'kvPlanes', code: 'KV_PLANES_MISMATCH' },
  { field: 'blockTokens', code: 'BLOCK_TOKENS_MISMATCH' },
  { field: 'numKvHeads', code: 'NUM_KV_HEADS_MISMATCH' },
  { field: 'headDim', code: 'HEAD_DIM_MISMATCH' },
  { field: 'dtype', code: 'DTYPE_MISMATCH' },
  { field: 'headOrder', code: 'HEAD_ORDER_MISMATCH' },
];

function intersect(a: IndexRange, b: IndexRange): IndexRange | undefined {
  const start = Math.max(a.start, b.start);
  const end = Math.min(a.start + a.count, b.start + b.count);
  return end > start ? { start, count: end - start } : undefined;
}

/**
 * Whether blocks can move from `source` to `destination` (two complete workers), and if so which source
 * rank supplies which heads and layers of each destination rank. Bank layouts may differ; TP sizes may
 * differ when one divides the other; PP sizes may differ freely. When the source replicates KV heads
 * (tpSize > numKvHeads), destination ranks spread over the replicas. Never throws for a mismatch.
 *
 * A worker is trusted only as far as it is checked: `source` and `destination` must each hold one valid rank
 * part per rank, at its index, with the worker's sizes and geometry, as `assembleWorker` returns them; else
 * this throws `InvalidRankPartError` naming the argument and the field (`destination.ranks`,
 * `source.ranks[1].parallel.tpRank`, …). For assembled workers that costs a few comparisons per rank.
 */
export function checkCompatibility(source: Worker, destination: Worker): CompatibilityResult {
  return checkedCompatibility(source, destination).result;
}

/** What `checkCompatibility` checks, with the rank parts it checked: planning reads those, not the workers' own. */
export function checkedCompatibility(
  source: Worker,
  destination: Worker,
): { result: CompatibilityResult; sourceRanks: readonly RankPart[]; destinationRanks: readonly RankPart[] } {
  const sourceRanks = checkedWorkerRanks('source', source);
  const destinationRanks = checkedWorkerRanks('destination', destination);
  return { result: compatibility(source, destination), sourceRanks, destinationRanks };
}

/** `checkCompatibility` of two workers whose ranks are checked. */
function compatibility(source: Worker, destination: Worker): CompatibilityResult {
  const reasons: IncompatibilityReason[] = [];
  for (const { field, code } of matchingGeometry) {
    const from = source.geometry[field];
    const to = destination.geometry[field];
    if (from !== to) {
      reasons.push({
        code,
        field: `geometry.${field}`,
        source: from,
        destination: to,
        message: `source ${field} is ${from}, destination ${field} is ${to}`,
      });
    }
  }
  const larger = Math.max(source.tpSize, destination.tpSize);
  const smaller = Math.min(source.tpSize, destination.tpSize);
  if (larger % smaller !== 0) {
    reasons.push({
      code: 'TP_SIZES_NOT_DIVISIBLE',
      field: 'tpSize',
      source: source.tpSize,
      destination: destination.tpSize,
      message: `source tpSize ${source.tpSize} and destination tpSize ${destination.tpSize}: neither divides the other`,
    });
  }
  if (reasons.length > 0) return { ok: false, reasons };

  const geometry = source.geometry;
  const routes: RankRoute[] = [];
  for (let dstPp = 0; dstPp < destination.ppSize; dstPp++) {
    for (let dstTp = 0; dstTp < destination.tpSize; dstTp++) {
      const to = deriveShard(geometry, {
        tpRank: dstTp,
        tpSize: destination.tpSize,
        ppRank: dstPp,
        ppSize: destination.ppSize,
      });
      for (let srcPp = 0; srcPp < source.ppSize; srcPp++) {
        for (let srcTp = 0; srcTp < source.tpSize; srcTp++) {
          const from = deriveShard(geometry, {
            tpRank: srcTp,
            tpSize: source.tpSize,
            ppRank: srcPp,
            ppSize: source.ppSize,
          });
          // Replicated source heads: destination rank d reads from replica d mod replicas.
          if (srcTp % from.kvHeadReplicas !== dstTp % from.kvHeadReplicas) continue;
          const kvHeads = intersect(from.kvHeads, to.kvHeads);
          const layers = intersect(from.layers, to.layers);
          if (kvHeads === undefined || layers === undefined) continue;
          routes.push({
            sourceRank: { tpRank: srcTp, ppRank: srcPp },
            destinationRank: { tpRank: dstTp, ppRank: dstPp },
            kvHeads,
            layers,
          });
        }
      }
    }
  }
  return { ok: true, mapping: { routes } };
}
