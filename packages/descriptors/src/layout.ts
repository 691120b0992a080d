import {
  type Bank,
  countRule,
  type MemKind,
  memKinds,
  positiveCount,
  positiveCountRule,
  SPAN_LIMIT,
  U64_LIMIT,
  u64Rule,
} from './bank.js';
import { InvalidBankLayoutError, InvalidGeometryError, InvalidShardError, isObject } from './errors.js';
import { type FieldIssue, oneOfRule } from './field-issue.js';
import { byteProductIssue, bytesPerElement, type Geometry, geometryFieldIssue } from './geometry.js';
import { deriveShard, type Parallel, type Shard } from './shard.js';

type PieceGeometry = Pick<Geometry, 'blockTokens' | 'headDim' | 'dtype'>;

/** Refuses a geometry argument that is no object, or whose `fields` (those the caller reads) break the geometry's rules. */
function checkGeometryArgument(geometry: unknown, fields: readonly (keyof Geometry)[]): void {
  if (!isObject(geometry))
    throw new InvalidGeometryError([{ field: 'geometry', value: geometry, rule: 'a KV geometry object' }]);
  const issue = geometryFieldIssue(geometry, fields);
  if (issue !== undefined) throw new InvalidGeometryError([issue]);
}

/** Refuses a shard argument that is no object, or whose `ranges` (those the caller reads) have no count a shard has. */
function checkShardArgument(shard: unknown, ranges: readonly (keyof Pick<Shard, 'kvHeads' | 'layers'>)[]): void {
  if (!isObject(shard)) throw new InvalidShardError({ field: 'shard', value: shard, rule: 'a shard from deriveShard' });
  for (const name of ranges) {
    const range: unknown = (shard as Record<string, unknown>)[name];
    if (!isObject(range))
      throw new InvalidShardError({
        field: `shard.${name}`,
        value: range,
        rule: '{ start, count }, as deriveShard gives it',
      });
    const { count } = range as { count?: unknown };
    if (!positiveCount.safeParse(count).success)
      throw new InvalidShardError({
        field: `shard.${name}.count`,
        value: count,
        rule: positiveCountRule,
      });
  }
}

const pieceFields = ['blockTokens', 'headDim', 'dtype'] as const;

/** The factors of the bytes of one piece holding `headCount` heads, named as the caller's arguments name them. */
function pieceFactors(geometry: PieceGeometry, headCountName: string, headCount: number): Record<string, number> {
  return {
    blockTokens: geometry.blockTokens,
    [headCountName]: headCount,
    headDim: geometry.headDim,
    [`bytesPerElement(${geometry.dtype})`]: bytesPerElement(geometry.dtype),
  };
}

/** The product of byte-size `factors`, refused (`InvalidGeometryError`, naming them) when it passes 2^53 − 1. */
function exactBytes(factors: Readonly<Record<string, number>>): number {
  const issue = byteProductIssue(factors);
  if (issue !== undefined) throw new InvalidGeometryError([issue]);
  return Object.values(factors).reduce((bytes, factor) => bytes * factor, 1);
}

/**
 * Bytes of one (block, layer, plane) piece of a rank: block tokens × the rank's heads × head dim × element bytes.
 * A field it reads that is missing or bad is refused, named: `InvalidGeometryError`, `InvalidShardError`; so is
 * a piece of more than 2^53 − 1 bytes (`InvalidGeometryError`, naming the factors).
 */
export function pieceBytes(geometry: PieceGeometry, shard: Pick<Shard, 'kvHeads'>): number {
  checkGeometryArgument(geometry, pieceFields);
  checkShardArgument(shard, ['kvHeads']);
  return exactBytes(pieceFactors(geometry, 'shard.kvHeads.count', shard.kvHeads.count));
}

/**
 * Bytes of one block of a rank over all of its layers and planes. A field it reads that is missing or bad is
 * refused, named: `InvalidGeometryError`, `InvalidShardError`; so is a block of more than 2^53 − 1 bytes
 * (`InvalidGeometryError`, naming the factors).
 */
export function rankBlockBytes(geometry: PieceGeometry & Pick<Geometry, 'kvPlanes'>, shard: Shard): number {
  checkGeometryArgument(geometry, [...pieceFields, 'kvPlanes']);
  checkShardArgument(shard, ['kvHeads', 'layers']);
  return exactBytes({
    ...pieceFactors(geometry, 'shard.kvHeads.count', shard.kvHeads.count),
    'shard.layers.count': shard.layers.count,
    kvPlanes: geometry.kvPlanes,
  });
}

export interface PlaneStrideOption {
  /** The layer-separate banks hold every plane of their layer, `planeStride` bytes apart (rank part version 2). */
  readonly planeStrided?: boolean;
}

/**
 * How many banks a rank has: layer-separate, one per (local layer, plane), or one per local layer when
 * the banks are plane-strided; fully-contiguous, one. A field it reads that is missing or bad is refused,
 * named: `InvalidGeometryError`, `InvalidShardError`, `InvalidBankLayoutError` (the options).
 */
export function bankCount(
  geometry: Pick<Geometry, 'bankLayout' | 'kvPlanes'>,
  shard: Shard,
  options: PlaneStrideOption = {},
): number {
  checkGeometryArgument(geometry, ['bankLayout', 'kvPlanes']);
  checkShardArgument(shard, ['layers']);
  if (!isObject(options))
    throw new InvalidBankLayoutError([{ field: 'options', value: options, rule: 'must be { planeStrided? }' }]);
  if (options.planeStrided !== undefined && typeof options.planeStrided !== 'boolean')
    throw new InvalidBankLayoutError([
      { field: 'options.planeStrided', value: options.planeStrided, rule: 'must be a boolean when given' },
    ]);
  if (geometry.bankLayout === 'fully-contiguous') return 1;
  return options.planeStrided === true ? shard.layers.count : shard.layers.count * geometry.kvPlanes;
}

/**
 * The smallest block stride a rank's banks may have: one piece when layer-separate (plane-strided banks
 * included: their planes may also lie after all blocks), one rank block when fully contiguous. A field it
 * reads that is missing or bad is refused, named: `InvalidGeometryError`, `InvalidShardError`.
 */
export function minimumBlockStride(geometry: Geometry, shard: Shard): number {
  checkGeometryArgument(geometry, ['bankLayout']);
  return geometry.bankLayout === 'layer-separate' ? pieceBytes(geometry, shard) : rankBlockBytes(geometry, shard);
}

/** The stride fields of a bank that decide where its pieces lie. */
export type BankStrides = Pick<Bank, 'blocks' | 'blockStride' | 'planeStride'>;

/**
 * Bytes from a bank's start that its pieces may reach: `blocks × blockStride`, and for a plane-strided
 * bank at least up to the end of its last block's last plane. A bank field, `piece` or `planes` that is missing
 * or bad is refused, named (`InvalidBankLayoutError`).
 */
export function bankSpan(bank: BankStrides, piece: number, planes: number): bigint {
  if (!isObject(bank))
    throw new InvalidBankLayoutError([{ field: 'bank', value: bank, rule: 'a bank with its blocks and strides' }]);
  const issues = bankSpanIssues(bank, piece, planes);
  if (issues.length > 0) throw new InvalidBankLayoutError(issues);
  const blocksSpan = BigInt(bank.blocks) * bank.blockStride;
  if (bank.planeStride === undefined) return blocksSpan;
  const lastPlaneEnd =
    BigInt(bank.blocks - 1) * bank.blockStride + BigInt(planes - 1) * bank.planeStride + BigInt(piece);
  return lastPlaneEnd > blocksSpan ? lastPlaneEnd : blocksSpan;
}

/** What `bankSpan` cannot compute with: the bank's fields as a rank part's bank holds them, one piece's bytes, the planes. */
function bankSpanIssues(bank: object, piece: unknown, planes: unknown): FieldIssue[] {
  const { blocks, blockStride, planeStride } = bank as Partial<Record<keyof BankStrides, unknown>>;
  const issues: FieldIssue[] = [];
  if (!positiveCount.safeParse(blocks).success)
    issues.push({ field: 'bank.blocks', value: blocks, rule: positiveCountRule });
  if (!isU64(blockStride)) issues.push({ field: 'bank.blockStride', value: blockStride, rule: u64Rule });
  if (planeStride !== undefined && !isU64(planeStride))
    issues.push({
      field: 'bank.planeStride',
      value: planeStride,
      rule: 'must be an unsigned 64-bit bigint when given',
    });
  if (!Number.isSafeInteger(piece) || (piece as number) < 1)
    issues.push({
      field: 'piece',
      value: piece,
      rule: 'must be the bytes of one piece (pieceBytes), a positive integer',
    });
  const planesIssue = geometryFieldIssue({ kvPlanes: planes }, ['kvPlanes']);
  if (planesIssue !== undefined) issues.push({ ...planesIssue, field: 'planes' });
  return issues;
}

/**
 * Why the planes of a plane-strided bank would overlap, or `undefined` when no two pieces of it do.
 * Plane 1 of block b starts at `b × blockStride + planeStride`, so it meets plane 0 of block b + k exactly
 * when `|planeStride − k × blockStride| < piece` for some k in `[0, blocks)`; only the two multiples of
 * blockStride around planeStride can come that close.
 */
export function planeOverlap(bank: BankStrides, piece: number, planes: number): string | undefined {
  const { planeStride, blockStride } = bank;
  if (planeStride === undefined || planes < 2) return undefined;
  const size = BigInt(piece);
  const below = planeStride / blockStride;
  for (const k of [below, below + 1n]) {
    if (k >= BigInt(bank.blocks)) continue;
    const gap = planeStride - k * blockStride;
    if (gap < size && -gap < size) {
      return `plane 1 of block b overlaps plane 0 of block b + ${k} (blockStride ${blockStride}, one piece ${piece} bytes)`;
    }
  }
  return undefined;
}

/** Bank index of the (local layer, plane) pieces of a rank, and their offset inside each block. */
export function pieceSlot(
  geometry: Geometry,
  shard: Shard,
  banks: readonly BankStrides[],
  localLayer: number,
  plane: number,
): { bank: number; within: number } {
  const layerPlane = localLayer * geometry.kvPlanes + plane;
  if (geometry.bankLayout === 'fully-contiguous') return { bank: 0, within: layerPlane * pieceBytes(geometry, shard) };
  // A parsed part's banks are all plane-strided or none is, so the first bank tells.
  const planeStride = banks[0]?.planeStride;
  if (planeStride === undefined) return { bank: layerPlane, within: 0 };
  return { bank: localLayer, within: plane * Number((banks[localLayer] as BankStrides).planeStride) };
}

/**
 * Byte offset of element (head, token, dim) inside one (block, layer, plane) piece of a rank holding
 * `headCount` heads; `head` is local to the rank. HND is `[head][token][dim]`, NHD `[token][head][dim]`.
 * A geometry field it reads that is missing or bad, a `headCount` that is no positive integer below 2^31, a
 * `head`, `token` or `dim` outside the piece, or a piece of more than 2^53 − 1 bytes is refused, named
 * (`InvalidGeometryError`).
 */
export function elementOffset(
  geometry: PieceGeometry & Pick<Geometry, 'headOrder'>,
  headCount: number,
  head: number,
  token: number,
  dim: number,
): number {
  checkGeometryArgument(geometry, [...pieceFields, 'headOrder']);
  const { blockTokens, headDim } = geometry;
  if (!positiveCount.safeParse(headCount).success)
    throw new InvalidGeometryError([{ field: 'headCount', value: headCount, rule: positiveCountRule }]);
  const issues = [
    elementIndexIssue('head', head, headCount, 'headCount'),
    elementIndexIssue('token', token, blockTokens, 'blockTokens'),
    elementIndexIssue('dim', dim, headDim, 'headDim'),
  ].filter((issue) => issue !== undefined);
  if (issues.length > 0) throw new InvalidGeometryError(issues);
  exactBytes(pieceFactors(geometry, 'headCount', headCount));
  const element =
    geometry.headOrder === 'HND'
      ? (head * blockTokens + token) * headDim + dim
      : (token * headCount + head) * headDim + dim;
  return element * bytesPerElement(geometry.dtype);
}

/** The issue of an element index of `elementOffset` that is no integer in `[0, limit)`, or `undefined`. */
function elementIndexIssue(field: string, value: unknown, limit: number, limitName: string): FieldIssue | undefined {
  if (Number.isInteger(value) && (value as number) >= 0 && (value as number) < limit) return undefined;
  return { field, value, rule: `must be an integer in [0, ${limitName}) = [0, ${limit})` };
}

export interface BankLayoutOptions {
  /** One address per bank, or the first bank's address with the others following it, each start aligned. */
  readonly address: bigint | readonly bigint[];
  /** Blocks per bank. */
  readonly blocks: number;
  /** Defaults to the minimum for the rank's shard, or one piece past the last plane when plane-strided. */
  readonly blockStride?: number;
  /**
   * Layer-separate only: one bank per local layer holding every plane, plane p of block b at
   * `b × blockStride + p × planeStride` (vLLM's `(blocks, 2, …)` with one piece, `(2, blocks, …)` with
   * `blocks × blockStride`). The banks are then version 2 banks.
   */
  readonly planeStride?: number;
  readonly memKind?: MemKind;
  readonly deviceId?: number;
  /** Alignment of each bank's start when laid out from one address (a power of two; default 4096). */
  readonly alignment?: number;
}

// In bigints: `&` on numbers keeps only the low 32 bits, so 3 × 2^32 would pass.
const isPowerOfTwo = (n: number): boolean => Number.isSafeInteger(n) && n > 0 && (BigInt(n) & BigInt(n - 1)) === 0n;
const isU64 = (value: unknown): value is bigint => typeof value === 'bigint' && value >= 0n && value < U64_LIMIT;
// Past 2^53 − 1 a number no longer holds the stride the caller meant, so it is refused at its own field.
const isStride = (value: number, minimum: number): boolean => Number.isSafeInteger(value) && value >= minimum;
const strideRule = (minimum: number): string => `must be an integer from ${minimum} to 2^53 − 1`;

/**
 * Lays out the banks of one rank: `bankCount` banks of `bankSpan` bytes, in (local layer, plane) order.
 * Used by tests, examples and the layers that allocate real memory.
 */
export function layoutRankBanks(
  geometry: Geometry,
  parallel: Omit<Parallel, 'dpRank'>,
  options: BankLayoutOptions,
): Bank[] {
  const shard = deriveShard(geometry, parallel);
  if (typeof options !== 'object' || options === null)
    throw new InvalidBankLayoutError([{ field: 'options', value: options, rule: 'must be { address, blocks, … }' }]);
  const { planeStride } = options;
  const planeStrided = planeStride !== undefined;
  const count = bankCount(geometry, shard, { planeStrided });
  const piece = pieceBytes(geometry, shard);
  const minimumStride = minimumBlockStride(geometry, shard);
  const defaultStride = planeStrided ? (geometry.kvPlanes - 1) * planeStride + piece : minimumStride;
  const { blocks, blockStride = defaultStride, memKind = 'dram', deviceId = 0, alignment = 4096 } = options;
  const issues: FieldIssue[] = [];
  // As a rank part's bank holds them, so that every layout it returns is one a rank part can carry.
  if (!positiveCount.safeParse(blocks).success)
    issues.push({ field: 'blocks', value: blocks, rule: positiveCountRule });
  // The default is valid whenever planeStride is; a bad planeStride is that field's fault, reported below.
  if (options.blockStride !== undefined && !isStride(blockStride, minimumStride)) {
    issues.push({ field: 'blockStride', value: blockStride, rule: strideRule(minimumStride) });
  }
  if (planeStrided && geometry.bankLayout !== 'layer-separate') {
    issues.push({ field: 'planeStride', value: planeStride, rule: 'applies to layer-separate banks only' });
  } else if (planeStrided && !isStride(planeStride, piece)) {
    issues.push({ field: 'planeStride', value: planeStride, rule: `${strideRule(piece)} (one piece)` });
  }
  if (!memKinds.includes(memKind)) issues.push({ field: 'memKind', value: memKind, rule: oneOfRule(memKinds) });
  if (!Number.isInteger(deviceId) || deviceId < 0 || deviceId > 2 ** 31 - 1) {
    issues.push({ field: 'deviceId', value: deviceId, rule: countRule });
  }
  if (!isPowerOfTwo(alignment)) issues.push({ field: 'alignment', value: alignment, rule: 'must be a power of two' });
  if (Array.isArray(options.address)) {
    if (options.address.length !== count)
      issues.push({ field: 'address', value: options.address, rule: `must hold one address per bank (${count})` });
    else if (!options.address.every(isU64))
      issues.push({ field: 'address', value: options.address, rule: 'must hold unsigned 64-bit bigints' });
  } else if (!isU64(options.address)) {
    issues.push({
      field: 'address',
      value: options.address,
      rule: 'must be an unsigned 64-bit bigint, or one such bigint per bank',
    });
  }
  if (issues.length > 0) throw new InvalidBankLayoutError(issues);
  const strides: BankStrides = planeStrided
    ? { blocks, blockStride: BigInt(blockStride), planeStride: BigInt(planeStride) }
    : { blocks, blockStride: BigInt(blockStride) };
  const overlap = planeOverlap(strides, piece, geometry.kvPlanes);
  if (overlap !== undefined)
    throw new InvalidBankLayoutError([
      { field: 'planeStride', value: planeStride, rule: `the planes would overlap: ${overlap}` },
    ]);

  const bytes = bankSpan(strides, piece, geometry.kvPlanes);
  if (bytes > SPAN_LIMIT) {
    throw new InvalidBankLayoutError([
      { field: 'blocks', value: blocks, rule: `the banks would span ${bytes} bytes, which must stay below 2^53` },
    ]);
  }
  const align = BigInt(alignment);
  const banks: Bank[] = [];
  let next = typeof options.address === 'bigint' ? options.address : 0n;
  for (let index = 0; index < count; index++) {
    const address = typeof options.address === 'bigint' ? next : ((options.address as readonly bigint[])[index] ?? 0n);
    if (address + bytes > U64_LIMIT) {
      throw new InvalidBankLayoutError([
        {
          field: 'address',
          value: options.address,
          rule: `bank ${index} at ${address} (${bytes} bytes) would pass the end of the 64-bit address space`,
        },
      ]);
    }
    banks.push({ memKind, deviceId, address, bytes, ...strides });
    next = ((address + bytes + align - 1n) / align) * align;
  }
  return banks;
}
