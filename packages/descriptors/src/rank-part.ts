import { z } from 'zod';
import { type Bank, bankSchema, count, positiveCount, SPAN_LIMIT, U64_LIMIT } from './bank.js';
import { InvalidRankPartError, PieceOutOfRangeError } from './errors.js';
import { oneOfRule } from './field-issue.js';
import { geometrySchema, type SafeParseResult } from './geometry.js';
import { bankCount, bankSpan, minimumBlockStride, pieceBytes, pieceSlot, planeOverlap } from './layout.js';
import type { RankId } from './rank-id.js';
import { deriveShard, shardSplitIssue } from './shard.js';
import { toFieldIssues, unreadableInput } from './zod-issues.js';

export const roles = ['prefill', 'decode', 'aggregated'] as const;
export type Role = (typeof roles)[number];

const nonEmptyRule = 'must be a non-empty string';
const nonEmptyString = z.string({ error: nonEmptyRule }).min(1, nonEmptyRule);

const parallelSchema = z.strictObject(
  {
    tpRank: count,
    tpSize: positiveCount,
    ppRank: count,
    ppSize: positiveCount,
    dpRank: count,
  },
  { error: 'must be { tpRank, tpSize, ppRank, ppSize, dpRank }' },
);

const transportSchema = z.strictObject(
  {
    agentName: nonEmptyString,
    generation: count,
    /** The transport's address and keys blob, base64. */
    metadata: z.base64({ error: 'must be a base64 string' }),
  },
  { error: 'must be { agentName, generation, metadata }' },
);

interface RuleViolation {
  readonly path: PropertyKey[];
  readonly message: string;
}

/** The rules between fields: ranks within sizes, a dividing shard split of at most 65,536 ranks, and the bank rules. */
function rankRuleViolations(
  part: Pick<RankPart, 'version' | 'geometry' | 'parallel' | 'banks' | 'host'>,
): RuleViolation[] {
  const { geometry, parallel, banks } = part;
  const violations: RuleViolation[] = [];
  const report = (path: PropertyKey[], message: string): void => {
    violations.push({ path, message });
  };
  if (parallel.tpRank >= parallel.tpSize) report(['parallel', 'tpRank'], `must be below tpSize (${parallel.tpSize})`);
  if (parallel.ppRank >= parallel.ppSize) report(['parallel', 'ppRank'], `must be below ppSize (${parallel.ppSize})`);
  const splitIssue = shardSplitIssue(geometry, parallel);
  if (splitIssue !== undefined) report(splitIssue.field.split('.'), splitIssue.rule);
  if (violations.length > 0) return violations;

  const shard = deriveShard(geometry, parallel);
  const layerSeparate = geometry.bankLayout === 'layer-separate';
  const planeStrided = banks[0]?.planeStride !== undefined;
  if (part.host !== undefined && part.version < 3) report(['host'], 'needs rank part version 3');
  banks.forEach((bank, index) => {
    const path = ['banks', index, 'planeStride'];
    if (bank.planeStride !== undefined && part.version < 2) report(path, 'needs rank part version 2');
    else if (bank.planeStride !== undefined && !layerSeparate) report(path, 'applies to layer-separate banks only');
    else if ((bank.planeStride !== undefined) !== planeStrided) {
      report(path, 'must be given on every bank of the rank or on none (banks[0] decides)');
    }
  });
  if (violations.length > 0) return violations;

  const expectedBanks = bankCount(geometry, shard, { planeStrided });
  if (banks.length !== expectedBanks) {
    const rule = !layerSeparate
      ? 'fully-contiguous needs exactly one bank'
      : planeStrided
        ? `plane-strided layer-separate needs one bank per local layer: ${expectedBanks}`
        : `layer-separate needs one bank per (local layer, plane): ${shard.layers.count} × ${geometry.kvPlanes} = ${expectedBanks}`;
    report(['banks'], `has ${banks.length} banks; ${rule}`);
  }
  const piece = pieceBytes(geometry, shard);
  const minimumStride = BigInt(minimumBlockStride(geometry, shard));
  const strideUnit = layerSeparate ? '(layer, plane) piece' : 'block of all local layers and planes';
  banks.forEach((bank, index) => {
    const span = bankSpan(bank, piece, geometry.kvPlanes);
    const overlap = planeOverlap(bank, piece, geometry.kvPlanes);
    if (bank.blockStride < minimumStride) {
      report(
        ['banks', index, 'blockStride'],
        `must be at least ${minimumStride} bytes (one ${strideUnit} of this rank)`,
      );
    } else if (overlap !== undefined) {
      report(['banks', index, 'planeStride'], `the planes overlap: ${overlap}`);
    } else if (span > bank.bytes) {
      const what =
        bank.planeStride === undefined
          ? `blocks × blockStride = ${bank.blocks} × ${bank.blockStride}`
          : 'every plane of every block';
      report(['banks', index, 'bytes'], `must hold ${what} = ${span} bytes`);
    } else if (span > SPAN_LIMIT) {
      report(['banks', index, 'blocks'], `the blocks span ${span} bytes, which must stay below 2^53`);
    }
    if (bank.address + bank.bytes > U64_LIMIT) {
      report(['banks', index, 'bytes'], `address + bytes must not pass 2^64 (address ${bank.address})`);
    }
  });
  for (const { index, message } of bankOverlaps(banks, layerSeparate && !planeStrided)) {
    report(['banks', index, 'address'], message);
  }
  return violations;
}

/**
 * The banks that overlap an earlier bank of the same memory, in address order. `hintPlaneStride` adds the hint
 * that planes interleaved in one allocation are described with `planeStride`.
 */
function bankOverlaps(
  banks: readonly Bank[],
  hintPlaneStride: boolean,
): { readonly index: number; readonly message: string }[] {
  // Sorted by start, a bank overlaps an earlier one of the same memory exactly when it starts before the
  // furthest end seen so far there.
  const byStart = banks
    .map((bank, index) => ({ bank, index }))
    .sort((a, b) => compareBigInt(a.bank.address, b.bank.address));
  const furthest = new Map<string, { end: bigint; index: number }>();
  const overlaps: { index: number; message: string }[] = [];
  for (const { bank, index } of byStart) {
    const memory = `${bank.memKind}:${bank.deviceId}`;
    const seen = furthest.get(memory);
    if (seen !== undefined && seen.end > bank.address) {
      const hint = hintPlaneStride
        ? ' (planes interleaved in one allocation are one bank per layer with planeStride)'
        : '';
      overlaps.push({ index, message: `overlaps banks[${seen.index}], which ends at ${seen.end}${hint}` });
    }
    const end = bank.address + bank.bytes;
    if (seen === undefined || end > seen.end) furthest.set(memory, { end, index });
  }
  return overlaps;
}

const hostRule = 'must be a string of 1 to 255 characters';

/** The rank part versions this package reads; version 2 adds `planeStride` to banks, version 3 `host`. */
export const rankPartVersions = [1, 2, 3] as const;

/** A rank part's fields, each with its own rule; `rankPartSchema` adds the rules between them. */
const rankPartFieldsSchema = z.strictObject(
  {
    version: z.literal(rankPartVersions, { error: oneOfRule(rankPartVersions) }),
    workerId: nonEmptyString,
    incarnation: nonEmptyString,
    role: z.enum(roles, { error: oneOfRule(roles) }),
    geometry: geometrySchema,
    parallel: parallelSchema,
    banks: z.array(bankSchema, { error: 'must be an array of banks' }).min(1, 'must hold at least one bank'),
    transport: transportSchema,
    /**
     * Version 3: the machine the rank runs on, named as the deployment names machines (a hostname, a
     * node name, a kernel boot id): ranks that publish the same host share a machine.
     */
    host: z.string({ error: hostRule }).min(1, hostRule).max(255, hostRule).optional(),
  },
  { error: 'must be a rank part object' },
);

/**
 * What one rank publishes. Version 2 adds `planeStride` to banks, version 3 the rank's `host`; older
 * parts are read as before.
 * Parsing also checks the shard split and the bank rules.
 */
export const rankPartSchema = rankPartFieldsSchema
  // The rank rules read valid parsed values. Parsing checks the fields before it gets here, but encoding
  // (`serializeRankPart`) gets here first, with fields nothing has checked, so the fields are checked here.
  .superRefine(
    (part, ctx) => {
      for (const { path, message } of rankRuleViolations(part)) ctx.addIssue({ code: 'custom', path, message });
    },
    {
      when: (payload) =>
        payload.issues.length === 0 &&
        rankPartFieldsSchema.safeEncode(payload.value as z.output<typeof rankPartFieldsSchema>).success,
    },
  );

const compareBigInt = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);

export type RankPart = z.output<typeof rankPartSchema>;
/** A rank part as it travels: JSON with 64-bit quantities as decimal strings. */
export type RankPartWire = z.input<typeof rankPartSchema>;

/** The worker and rank `input` claims to be, as far as they can be read. */
function claimedIdentity(input: unknown): { workerId: string | undefined; rank: RankId | undefined } {
  try {
    return readIdentity(input);
  } catch {
    return { workerId: undefined, rank: undefined };
  }
}

function readIdentity(input: unknown): { workerId: string | undefined; rank: RankId | undefined } {
  const record = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  const parallel = (
    typeof record['parallel'] === 'object' && record['parallel'] !== null ? record['parallel'] : {}
  ) as Record<string, unknown>;
  const { tpRank, ppRank } = parallel;
  return {
    workerId: typeof record['workerId'] === 'string' ? record['workerId'] : undefined,
    rank: typeof tpRank === 'number' && typeof ppRank === 'number' ? { tpRank, ppRank } : undefined,
  };
}

/** Every part the parser produced: frozen, so it still holds what was checked. */
const parsedParts = new WeakSet<RankPart>();

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

function brand(part: RankPart): RankPart {
  parsedParts.add(deepFreeze(part));
  return part;
}

/**
 * What `check` makes of `input` (parsing or encoding it), its refusal as `InvalidRankPartError`. An input that
 * throws while it is read (a getter, a proxy), by `check` or while its refusal is worded, is refused too.
 */
function checkRankPartInput<T>(
  input: unknown,
  check: (input: unknown) => { success: true; data: T } | { success: false; error: z.ZodError },
): SafeParseResult<T, InvalidRankPartError> {
  try {
    const result = check(input);
    if (result.success) return result;
    const { workerId, rank } = claimedIdentity(input);
    return { success: false, error: new InvalidRankPartError(workerId, rank, toFieldIssues(result.error, input)) };
  } catch (error) {
    return { success: false, error: unreadablePartError(input, error) };
  }
}

/**
 * Parts the parser returns are frozen (deeply) and known to it as checked. Never throws: an input that
 * throws while it is read (a getter, a proxy) is a failure too.
 */
export function safeParseRankPart(input: unknown): SafeParseResult<RankPart, InvalidRankPartError> {
  const result = checkRankPartInput(input, (value) => rankPartSchema.safeParse(value));
  return result.success ? { success: true, data: brand(result.data) } : result;
}

export function parseRankPart(input: unknown): RankPart {
  const result = safeParseRankPart(input);
  if (!result.success) throw result.error;
  return result.data;
}

/**
 * `part` itself when the parser produced it; otherwise a parsed, frozen copy of it, checked by the same
 * schema and rules in its parsed form (64-bit fields as bigints). Throws `InvalidRankPartError`.
 */
export function checkedRankPart(part: RankPart): RankPart {
  if (parsedParts.has(part)) return part;
  return parseRankPart(serializeRankPart(part));
}

/**
 * The wire form of a rank part; `parseRankPart(serializeRankPart(part))` equals `part`. Checks the same
 * rules as parsing, so only valid parts go out (throws `InvalidRankPartError`); a part that throws while it is
 * read (a getter, a proxy) is refused the same way, naming the field, with what it threw as the error's `cause`.
 */
export function serializeRankPart(part: RankPart): RankPartWire {
  const result = checkRankPartInput(part, (value) => rankPartSchema.safeEncode(value as RankPart));
  if (!result.success) throw result.error;
  return result.data;
}

/** The error for a part that threw while it was read, naming the field that throws, with what it threw as `cause`. */
function unreadablePartError(part: unknown, error: unknown): InvalidRankPartError {
  const { workerId, rank } = claimedIdentity(part);
  return new InvalidRankPartError(workerId, rank, [unreadableInput(error, part)], { cause: error });
}

/**
 * Where the (block, local layer, plane) piece of a rank starts: the bank index (layer-separate: bank
 * `localLayer × kvPlanes + plane`, or `localLayer` when plane-strided) and the byte offset from that bank's start.
 * A part the parser did not return is checked like `assembleWorker` checks it (`InvalidRankPartError`).
 */
export function locatePiece(
  part: RankPart,
  block: number,
  localLayer: number,
  plane: number,
): { bank: number; offset: bigint } {
  if (typeof part !== 'object' || part === null) {
    throw new InvalidRankPartError(undefined, undefined, [
      { field: 'part', value: part, rule: 'a rank part (parseRankPart)' },
    ]);
  }
  const checked = checkedRankPart(part);
  const { geometry, parallel } = checked;
  const shard = deriveShard(geometry, parallel);
  const rank = { tpRank: parallel.tpRank, ppRank: parallel.ppRank };
  const inRange = (value: number, limit: number): boolean => Number.isInteger(value) && value >= 0 && value < limit;
  if (!inRange(localLayer, shard.layers.count))
    throw new PieceOutOfRangeError(rank, 'localLayer', localLayer, shard.layers.count);
  if (!inRange(plane, geometry.kvPlanes)) throw new PieceOutOfRangeError(rank, 'plane', plane, geometry.kvPlanes);
  const { bank, within } = pieceSlot(geometry, shard, checked.banks, localLayer, plane);
  // A parsed rank part has exactly bankCount() banks, so this bank exists.
  const { blocks, blockStride } = checked.banks[bank] as Bank;
  if (!inRange(block, blocks)) throw new PieceOutOfRangeError(rank, 'block', block, blocks);
  return { bank, offset: BigInt(block) * blockStride + BigInt(within) };
}
