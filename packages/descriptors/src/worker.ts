import { describeValue } from '@kvreuse/errors';
import { count, countRule } from './bank.js';
import { type Geometry, geometryFields } from './geometry.js';
import { geometryDigest } from './digest.js';
import type { RankId } from './rank-id.js';
import { InvalidRankPartError, isObject } from './errors.js';
import { checkedRankPart, type RankPart, type Role } from './rank-part.js';

/** A complete worker descriptor: every (tp, pp) rank present exactly once, all consistent. */
export interface Worker {
  readonly workerId: string;
  readonly incarnation: string;
  readonly role: Role;
  readonly geometry: Geometry;
  readonly geometryDigest: string;
  readonly tpSize: number;
  readonly ppSize: number;
  readonly dpRank: number;
  /** Rank parts indexed by `ppRank × tpSize + tpRank`; use `rankPartOf`. */
  readonly ranks: readonly RankPart[];
}

export interface DuplicateRank {
  readonly rank: RankId;
  /** How many parts claim this rank. */
  readonly count: number;
}

/** A part whose field disagrees with what most parts say. */
export interface RankConflict {
  readonly rank: RankId;
  /** Dotted path such as `incarnation` or `geometry.numLayers`. */
  readonly field: string;
  readonly expected: unknown;
  readonly actual: unknown;
}

export type AssembleResult =
  | { readonly complete: true; readonly worker: Worker }
  | {
      readonly complete: false;
      readonly missing: readonly RankId[];
      readonly duplicates: readonly DuplicateRank[];
      readonly conflicts: readonly RankConflict[];
    };

/** The fields every part of one worker must share. */
const sharedFields: readonly { field: string; read: (part: RankPart) => unknown }[] = [
  { field: 'version', read: (part) => part.version },
  { field: 'workerId', read: (part) => part.workerId },
  { field: 'incarnation', read: (part) => part.incarnation },
  { field: 'role', read: (part) => part.role },
  { field: 'parallel.tpSize', read: (part) => part.parallel.tpSize },
  { field: 'parallel.ppSize', read: (part) => part.parallel.ppSize },
  { field: 'parallel.dpRank', read: (part) => part.parallel.dpRank },
  ...geometryFields.map((key) => ({ field: `geometry.${key}`, read: (part: RankPart) => part.geometry[key] })),
];

const rankOf = (part: RankPart): RankId => ({ tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank });

/** Equal field values give equal keys (parsed parts hold JSON values and bigints; nothing is cut, unlike in messages). */
function valueKey(value: unknown): string {
  return (
    JSON.stringify(value, (_key, inner: unknown) => (typeof inner === 'bigint' ? `${inner}n` : inner)) ?? String(value)
  );
}

/** The value most parts hold (the first seen on a tie), so that one odd part is the one reported. */
function majority(values: readonly unknown[]): unknown {
  const tally = new Map<string, { value: unknown; count: number }>();
  for (const value of values) {
    const key = valueKey(value);
    const entry = tally.get(key);
    if (entry === undefined) tally.set(key, { value, count: 1 });
    else entry.count++;
  }
  let best: { value: unknown; count: number } | undefined;
  for (const entry of tally.values()) if (best === undefined || entry.count > best.count) best = entry;
  return best?.value;
}

/**
 * Assembles the parts one worker published into a worker descriptor, or says exactly what is missing,
 * duplicated or inconsistent. An empty list is incomplete with a conflict on `parts`. Parts that did not
 * come from `parseRankPart` are checked like the parser checks them and replaced by parsed copies; the
 * first that fails throws the parser's `InvalidRankPartError`. The worker's parts are therefore frozen.
 */
export function assembleWorker(given: readonly RankPart[]): AssembleResult {
  if (!Array.isArray(given)) throw argumentError('parts', given, 'an array of rank parts');
  const parts = given.map(checkedRankPart);
  const first = parts[0];
  if (first === undefined) {
    return {
      complete: false,
      missing: [],
      duplicates: [],
      conflicts: [{ rank: { tpRank: 0, ppRank: 0 }, field: 'parts', expected: 'at least one rank part', actual: 0 }],
    };
  }
  const conflicts: RankConflict[] = [];
  const expected = new Map<string, unknown>();
  for (const { field, read } of sharedFields) {
    const values = parts.map(read);
    const value = majority(values);
    expected.set(field, value);
    parts.forEach((part, index) => {
      if (valueKey(values[index]) !== valueKey(value)) {
        conflicts.push({ rank: rankOf(part), field, expected: value, actual: values[index] });
      }
    });
  }
  const tpSize = expected.get('parallel.tpSize') as number;
  const ppSize = expected.get('parallel.ppSize') as number;

  const claims = new Map<string, { rank: RankId; parts: RankPart[] }>();
  for (const part of parts) {
    const key = `${part.parallel.tpRank}/${part.parallel.ppRank}`;
    const claim = claims.get(key);
    if (claim === undefined) claims.set(key, { rank: rankOf(part), parts: [part] });
    else claim.parts.push(part);
  }
  const duplicates: DuplicateRank[] = [];
  for (const { rank, parts: claimed } of claims.values()) {
    if (claimed.length > 1) duplicates.push({ rank, count: claimed.length });
  }
  const missing: RankId[] = [];
  const ranks: RankPart[] = [];
  for (let ppRank = 0; ppRank < ppSize; ppRank++) {
    for (let tpRank = 0; tpRank < tpSize; tpRank++) {
      const claimed = claims.get(`${tpRank}/${ppRank}`)?.parts[0];
      if (claimed === undefined) missing.push({ tpRank, ppRank });
      else ranks.push(claimed);
    }
  }
  if (missing.length > 0 || duplicates.length > 0 || conflicts.length > 0) {
    return { complete: false, missing, duplicates, conflicts };
  }
  return {
    complete: true,
    worker: {
      workerId: first.workerId,
      incarnation: first.incarnation,
      role: first.role,
      geometry: first.geometry,
      geometryDigest: geometryDigest(first.geometry),
      tpSize,
      ppSize,
      dpRank: first.parallel.dpRank,
      ranks,
    },
  };
}

/**
 * The part of rank (tpRank, ppRank) of a complete worker, or `undefined` when the worker has no such rank.
 * A rank whose `tpRank` or `ppRank` is no integer in [0, 2^31) is refused, named (`InvalidRankPartError`).
 */
export function rankPartOf(worker: Worker, rank: RankId): RankPart | undefined {
  checkWorkerArgument('worker', worker);
  if (!isObject(rank)) throw argumentError('rank', rank, 'a rank { tpRank, ppRank }');
  for (const field of ['tpRank', 'ppRank'] as const) {
    if (!count.safeParse(rank[field]).success) throw argumentError(`rank.${field}`, rank[field], countRule);
  }
  const inRange = rank.tpRank >= 0 && rank.tpRank < worker.tpSize && rank.ppRank >= 0 && rank.ppRank < worker.ppSize;
  return inRange ? worker.ranks[rank.ppRank * worker.tpSize + rank.tpRank] : undefined;
}

function argumentError(field: string, value: unknown, rule: string): InvalidRankPartError {
  return new InvalidRankPartError(undefined, undefined, [{ field, value, rule }]);
}

/**
 * The rank parts of `worker` as checked, which are what planning reads: each the part itself when the parser
 * returned it, else its parsed copy. Throws `InvalidRankPartError` naming `argument` and the field at fault
 * unless `worker` holds what planning reads of a complete worker: one rank part per rank (`tpSize × ppSize` of
 * them, at least one), each a valid part (checked as `assembleWorker` checks it) at its own index
 * `ppRank × tpSize + tpRank`, with the worker's sizes and geometry. Its banks are then those of its shard. For a
 * worker `assembleWorker` returned it costs a few comparisons per rank.
 */
export function checkedWorkerRanks(argument: string, worker: unknown): readonly RankPart[] {
  checkWorkerArgument(argument, worker);
  const { ranks, tpSize, ppSize, geometry } = worker;
  if (ranks.length === 0 || ranks.length !== tpSize * ppSize) {
    const rule = `must hold one rank part per rank, tpSize × ppSize = ${tpSize * ppSize}, and at least one`;
    throw argumentError(`${argument}.ranks`, ranks, rule);
  }
  return ranks.map((rank: unknown, index) => {
    const field = `${argument}.ranks[${index}]`;
    if (!isObject(rank)) throw argumentError(field, rank, 'a rank part (parseRankPart)');
    const part = checkedRankPartAt(field, rank as RankPart);
    const expected = { tpRank: index % tpSize, ppRank: Math.floor(index / tpSize), tpSize, ppSize };
    for (const key of ['tpRank', 'ppRank', 'tpSize', 'ppSize'] as const) {
      if (part.parallel[key] !== expected[key])
        throw argumentError(
          `${field}.parallel.${key}`,
          part.parallel[key],
          `must be ${expected[key]}, as its index says`,
        );
    }
    for (const key of geometryFields) {
      if (part.geometry[key] !== geometry[key]) {
        const rule = `must equal the worker's geometry.${key}, ${describeValue(geometry[key])}`;
        throw argumentError(`${field}.geometry.${key}`, part.geometry[key], rule);
      }
    }
    return part;
  });
}

/** `checkedRankPart(part)`, its refusal's fields named from `field`, where the part lies. */
function checkedRankPartAt(field: string, part: RankPart): RankPart {
  try {
    return checkedRankPart(part);
  } catch (error) {
    if (!(error instanceof InvalidRankPartError)) throw error;
    const issues = error.issues.map((issue) => ({
      ...issue,
      field: issue.field === '(root)' ? field : `${field}.${issue.field}`,
    }));
    throw new InvalidRankPartError(error.workerId, error.rank, issues, { cause: error });
  }
}

/** Throws `InvalidRankPartError` naming `argument` unless `worker` has the shape of a complete worker. */
export function checkWorkerArgument(argument: string, worker: unknown): asserts worker is Worker {
  const complete = isObject(worker) && isObject((worker as Worker).geometry) && Array.isArray((worker as Worker).ranks);
  if (!complete)
    throw argumentError(argument, worker, 'a complete worker (assembleWorker), with its geometry and ranks');
}
