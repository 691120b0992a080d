import { InvalidShardError } from './errors.js';
import type { FieldIssue } from './field-issue.js';
import { type Geometry, geometryFieldIssue } from './geometry.js';

export interface Parallel {
  readonly tpRank: number;
  readonly tpSize: number;
  readonly ppRank: number;
  readonly ppSize: number;
  readonly dpRank: number;
}

/** A contiguous range `[start, start + count)`. */
export interface IndexRange {
  readonly start: number;
  readonly count: number;
}

/** What one rank holds: a contiguous range of KV heads and of layers (global indices). */
export interface Shard {
  readonly kvHeads: IndexRange;
  readonly layers: IndexRange;
  /** How many TP ranks hold each of this rank's heads (> 1 when tpSize > numKvHeads). */
  readonly kvHeadReplicas: number;
}

/**
 * The most ranks (tpSize × ppSize) one worker may have: assembling a worker lists every rank it lacks, and
 * checking compatibility pairs every rank of one worker with every rank of the other, so a size of 2^30 would
 * have them build a billion entries.
 */
const MAX_WORKER_RANKS = 65_536;

type ShardInputs = Pick<Geometry, 'numKvHeads' | 'numLayers'>;
type SplitInputs = Pick<Parallel, 'tpSize' | 'ppSize'>;

/**
 * Why `parallel` cannot split `geometry` canonically, naming the field at fault (the geometry's `numKvHeads` or
 * `numLayers` when one is no positive integer, else a parallel size, or `parallel` when the sizes give more
 * than 65,536 ranks), or `undefined` when it can.
 */
export function shardSplitIssue(geometry: ShardInputs, parallel: SplitInputs): FieldIssue | undefined {
  if (typeof geometry !== 'object' || geometry === null)
    return { field: 'geometry', value: geometry, rule: 'must be a geometry object' };
  if (typeof parallel !== 'object' || parallel === null)
    return { field: 'parallel', value: parallel, rule: 'must be { tpRank, tpSize, ppRank, ppSize }' };
  // A geometry that cannot be split is the geometry's fault, not the split's.
  const geometryIssue = geometryFieldIssue(geometry, ['numKvHeads', 'numLayers'], 'geometry.');
  if (geometryIssue !== undefined) return geometryIssue;
  const { numKvHeads, numLayers } = geometry;
  const { tpSize, ppSize } = parallel;
  if (!Number.isInteger(tpSize) || tpSize < 1) {
    return { field: 'parallel.tpSize', value: tpSize, rule: 'must be a positive integer' };
  }
  if (!Number.isInteger(ppSize) || ppSize < 1) {
    return { field: 'parallel.ppSize', value: ppSize, rule: 'must be a positive integer' };
  }
  if (tpSize * ppSize > MAX_WORKER_RANKS) {
    return {
      field: 'parallel',
      value: { tpSize, ppSize },
      rule: `tpSize × ppSize = ${tpSize * ppSize} ranks; a worker has at most ${MAX_WORKER_RANKS}`,
    };
  }
  const headsSplit = tpSize <= numKvHeads ? numKvHeads % tpSize === 0 : tpSize % numKvHeads === 0;
  if (!headsSplit) {
    return {
      field: 'parallel.tpSize',
      value: tpSize,
      rule: `must divide numKvHeads (${numKvHeads}) or be a multiple of it`,
    };
  }
  if (numLayers % ppSize !== 0) {
    return { field: 'parallel.ppSize', value: ppSize, rule: `must divide numLayers (${numLayers})` };
  }
  return undefined;
}

/**
 * The canonical contiguous split: TP rank r of T holds KV heads `[r·H/T, (r+1)·H/T)` when T ≤ H, and head
 * `⌊r / (T/H)⌋` (replicated T/H times) when T > H; PP rank p of P holds layers `[p·L/P, (p+1)·L/P)`.
 */
export function deriveShard(geometry: ShardInputs, parallel: Omit<Parallel, 'dpRank'>): Shard {
  const issue = shardSplitIssue(geometry, parallel);
  if (issue !== undefined) throw new InvalidShardError(issue);
  const { numKvHeads, numLayers } = geometry;
  const { tpRank, tpSize, ppRank, ppSize } = parallel;
  if (!Number.isInteger(tpRank) || tpRank < 0 || tpRank >= tpSize) {
    throw new InvalidShardError({ field: 'parallel.tpRank', value: tpRank, rule: `must be in [0, ${tpSize})` });
  }
  if (!Number.isInteger(ppRank) || ppRank < 0 || ppRank >= ppSize) {
    throw new InvalidShardError({ field: 'parallel.ppRank', value: ppRank, rule: `must be in [0, ${ppSize})` });
  }
  const layersPerRank = numLayers / ppSize;
  const layers = { start: ppRank * layersPerRank, count: layersPerRank };
  if (tpSize <= numKvHeads) {
    const headsPerRank = numKvHeads / tpSize;
    return { kvHeads: { start: tpRank * headsPerRank, count: headsPerRank }, layers, kvHeadReplicas: 1 };
  }
  const replicas = tpSize / numKvHeads;
  return { kvHeads: { start: Math.floor(tpRank / replicas), count: 1 }, layers, kvHeadReplicas: replicas };
}
