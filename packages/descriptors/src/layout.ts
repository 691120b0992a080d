import { type FieldIssue, InvalidBankLayoutError, PieceOutOfRangeError } from './errors.js';
import { bytesPerElement, type Geometry } from './geometry.js';
import type { Bank, MemKind, RankPart } from './rank-part.js';
import { deriveShard, type Parallel, type Shard } from './shard.js';

type PieceGeometry = Pick<Geometry, 'blockTokens' | 'headDim' | 'dtype'>;

/** Bytes of one (block, layer, plane) piece of a rank: block tokens × the rank's heads × head dim × element bytes. */
export function pieceBytes(geometry: PieceGeometry, shard: Pick<Shard, 'kvHeads'>): number {
  return geometry.blockTokens * shard.kvHeads.count * geometry.headDim * bytesPerElement(geometry.dtype);
}

/** Bytes of one block of a rank over all of its layers and planes. */
export function rankBlockBytes(geometry: PieceGeometry & Pick<Geometry, 'kvPlanes'>, shard: Shard): number {
  return pieceBytes(geometry, shard) * shard.layers.count * geometry.kvPlanes;
}

/** How many banks a rank has: one per (local layer, plane) when layer-separate, else one. */
export function bankCount(geometry: Pick<Geometry, 'bankLayout' | 'kvPlanes'>, shard: Shard): number {
  return geometry.bankLayout === 'layer-separate' ? shard.layers.count * geometry.kvPlanes : 1;
}

/** The smallest block stride a rank's banks may have: one piece when layer-separate, one rank block otherwise. */
export function minimumBlockStride(geometry: Geometry, shard: Shard): number {
  return geometry.bankLayout === 'layer-separate' ? pieceBytes(geometry, shard) : rankBlockBytes(geometry, shard);
}

/**
 * Byte offset of element (head, token, dim) inside one (block, layer, plane) piece of a rank holding
 * `headCount` heads; `head` is local to the rank. HND is `[head][token][dim]`, NHD `[token][head][dim]`.
 */
export function elementOffset(
  geometry: PieceGeometry & Pick<Geometry, 'headOrder'>,
  headCount: number,
  head: number,
  token: number,
  dim: number,
): number {
  const { blockTokens, headDim } = geometry;
  const element =
    geometry.headOrder === 'HND'
      ? (head * blockTokens + token) * headDim + dim
      : (token * headCount + head) * headDim + dim;
  return element * bytesPerElement(geometry.dtype);
}

/**
 * Where the (block, local layer, plane) piece of a rank starts: the bank index (layer-separate: bank
 * `localLayer × kvPlanes + plane`) and the byte offset from that bank's start.
 */
export function locatePiece(part: RankPart, block: number, localLayer: number, plane: number): { bank: number; offset: bigint } {
  const { geometry, parallel } = part;
  const shard = deriveShard(geometry, parallel);
  const rank = { tpRank: parallel.tpRank, ppRank: parallel.ppRank };
  const inRange = (value: number, limit: number): boolean => Number.isInteger(value) && value >= 0 && value < limit;
  if (!inRange(localLayer, shard.layers.count)) throw new PieceOutOfRangeError(rank, 'localLayer', localLayer, shard.layers.count);
  if (!inRange(plane, geometry.kvPlanes)) throw new PieceOutOfRangeError(rank, 'plane', plane, geometry.kvPlanes);
  const layerPlane = localLayer * geometry.kvPlanes + plane;
  const layerSeparate = geometry.bankLayout === 'layer-separate';
  const bank = layerSeparate ? layerPlane : 0;
  // A parsed rank part has exactly bankCount() banks, so this bank exists.
  const { blocks, blockStride } = part.banks[bank] as Bank;
  if (!inRange(block, blocks)) throw new PieceOutOfRangeError(rank, 'block', block, blocks);
  const within = layerSeparate ? 0 : layerPlane * pieceBytes(geometry, shard);
  return { bank, offset: BigInt(block) * blockStride + BigInt(within) };
}

export interface BankLayoutOptions {
  /** One address per bank, or the first bank's address with the others following it, each start aligned. */
  readonly address: bigint | readonly bigint[];
  /** Blocks per bank. */
  readonly blocks: number;
  /** Defaults to the minimum for the rank's shard. */
  readonly blockStride?: number;
  readonly memKind?: MemKind;
  readonly deviceId?: number;
  /** Alignment of each bank's start when laid out from one address (a power of two; default 4096). */
  readonly alignment?: number;
}

const isPowerOfTwo = (n: number): boolean => Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;

/**
 * Lays out the banks of one rank: `bankCount` banks of `blocks × blockStride` bytes, in (local layer,
 * plane) order. Used by tests, examples and the layers that allocate real memory.
 */
export function layoutRankBanks(geometry: Geometry, parallel: Omit<Parallel, 'dpRank'>, options: BankLayoutOptions): Bank[] {
  const shard = deriveShard(geometry, parallel);
  const count = bankCount(geometry, shard);
  const minimumStride = minimumBlockStride(geometry, shard);
  const { blocks, blockStride = minimumStride, memKind = 'dram', deviceId = 0, alignment = 4096 } = options;
  const issues: FieldIssue[] = [];
  if (!Number.isInteger(blocks) || blocks < 1) issues.push({ field: 'blocks', value: blocks, rule: 'must be a positive integer' });
  if (!Number.isInteger(blockStride) || blockStride < minimumStride) {
    issues.push({ field: 'blockStride', value: blockStride, rule: `must be an integer ≥ ${minimumStride}` });
  }
  if (!isPowerOfTwo(alignment)) issues.push({ field: 'alignment', value: alignment, rule: 'must be a power of two' });
  if (Array.isArray(options.address) && options.address.length !== count) {
    issues.push({ field: 'address', value: options.address, rule: `must hold one address per bank (${count})` });
  }
  if (issues.length > 0) throw new InvalidBankLayoutError(issues);

  const bytes = BigInt(blocks) * BigInt(blockStride);
  const align = BigInt(alignment);
  const banks: Bank[] = [];
  let next = typeof options.address === 'bigint' ? options.address : 0n;
  for (let index = 0; index < count; index++) {
    const address = typeof options.address === 'bigint' ? next : (options.address as readonly bigint[])[index] ?? 0n;
    banks.push({ memKind, deviceId, address, bytes, blocks, blockStride: BigInt(blockStride) });
    next = ((address + bytes + align - 1n) / align) * align;
  }
  return banks;
}
