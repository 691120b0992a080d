import type { TransferTemplate } from '@kvreuse/descriptors';
import { ForeignHandleError, InvalidArgumentError } from './errors.js';
import type { AgentContext } from './handles.js';
import { check } from './library.js';
import type { Region } from './memory.js';

/** Which rank of a template's pair the regions hold. */
export type ChecksumSide = 'source' | 'destination';

export interface BlockChecksumsRequest {
  /** Built by `buildTransferTemplate` of `@kvreuse/descriptors`. */
  readonly template: TransferTemplate;
  /** The rank pair (index into `template.pairs`); may be left out when there is one. */
  readonly pair?: number;
  readonly side: ChecksumSide;
  /** This agent's regions, indexed by the side's bank numbers (banks the pair does not read may be absent). */
  readonly regions: readonly (Region | undefined)[];
  /** Block indices of the side's rank. */
  readonly blocks: Uint32Array | readonly number[];
}

/** The native call's arrays: one piece per route row of each block, in route order, numbered within the block. */
interface Pieces {
  readonly regionIndex: Uint32Array;
  readonly offset: BigUint64Array;
  readonly length: BigUint64Array;
  readonly group: Uint32Array;
  readonly ordinal: Uint32Array;
  readonly regions: Uint32Array;
}

function pairOf(template: TransferTemplate, pair: number | undefined): number {
  const chosen = pair ?? (template.pairs.length === 1 ? 0 : undefined);
  if (chosen === undefined || !Number.isInteger(chosen) || chosen < 0 || chosen >= template.pairs.length)
    throw new InvalidArgumentError('pair', pair, `must be an integer in 0 … ${template.pairs.length - 1}`);
  return chosen;
}

/** The region of `bank`, as an index into the table of regions the call reads (added on first use). */
function regionSlot(agent: AgentContext, request: BlockChecksumsRequest, bank: number, table: Region[]): number {
  const region = request.regions[bank];
  if (region === undefined)
    throw new InvalidArgumentError(`regions[${bank}]`, region, `must be the ${request.side} region of bank ${bank}`);
  if (!region.belongsTo(agent)) throw new ForeignHandleError('Region', `${region.id} (regions[${bank}])`, agent.name);
  region.assertOpen('compute checksums');
  const known = table.indexOf(region);
  return known >= 0 ? known : table.push(region) - 1;
}

/** One block's pieces at block 0, route by route and row by row, and how each moves with the block. */
interface BlockPattern {
  readonly slot: Uint32Array;
  readonly offset: Float64Array;
  readonly blockStride: Float64Array;
  readonly length: BigUint64Array;
  readonly ordinal: Uint32Array;
}

function blockPattern(
  agent: AgentContext,
  request: BlockChecksumsRequest,
  pair: number,
  table: Region[],
): BlockPattern {
  const { template, side } = request;
  const [first, end] = [template.pairRouteStart[pair] as number, template.pairRouteStart[pair + 1] as number];
  let rows = 0;
  for (let r = first; r < end; r++) rows += template.rows[r] as number;
  const pattern = {
    slot: new Uint32Array(rows),
    offset: new Float64Array(rows),
    blockStride: new Float64Array(rows),
    length: new BigUint64Array(rows),
    ordinal: Uint32Array.from({ length: rows }, (_, i) => i),
  };
  const onSource = side === 'source';
  for (let r = first, at = 0; r < end; r++) {
    const slot = regionSlot(
      agent,
      request,
      (onSource ? template.sourceBank : template.destinationBank)[r] as number,
      table,
    );
    // Numbers: every offset inside a region is below 2^53 (a region's bytes are a safe integer).
    const base = Number((onSource ? template.sourceBase : template.destinationBase)[r]);
    const blockStride = Number((onSource ? template.sourceBlockStride : template.destinationBlockStride)[r]);
    const rowStride = Number((onSource ? template.sourceRowStride : template.destinationRowStride)[r]);
    for (let k = 0; k < (template.rows[r] as number); k++, at++) {
      pattern.slot[at] = slot;
      pattern.offset[at] = base + k * rowStride;
      pattern.blockStride[at] = blockStride;
      pattern.length[at] = template.rowBytes[r] as bigint;
    }
  }
  return pattern;
}

function piecesOf(agent: AgentContext, request: BlockChecksumsRequest): Pieces {
  const { template, side, blocks } = request;
  const pair = pairOf(template, request.pair);
  if (side !== 'source' && side !== 'destination')
    throw new InvalidArgumentError('side', side, "must be 'source' or 'destination'");
  const table: Region[] = [];
  const pattern = blockPattern(agent, request, pair, table);
  const rows = pattern.slot.length;
  const count = rows * blocks.length;
  const pieces = {
    regionIndex: new Uint32Array(count),
    offset: new BigUint64Array(count),
    length: new BigUint64Array(count),
    group: new Uint32Array(count),
    ordinal: new Uint32Array(count),
  };
  // The offsets written as 32-bit halves (little-endian, as every platform the library is built for).
  const offsetHalves = new Uint32Array(pieces.offset.buffer);
  for (let i = 0, at = 0; i < blocks.length; i++) {
    const block = blocks[i] as number;
    if (!Number.isInteger(block) || block < 0 || block > 0xffff_ffff)
      throw new InvalidArgumentError(`blocks[${i}]`, block, 'must be a block index (a uint32)');
    pieces.regionIndex.set(pattern.slot, at);
    pieces.length.set(pattern.length, at);
    pieces.ordinal.set(pattern.ordinal, at);
    pieces.group.fill(i, at, at + rows);
    for (let k = 0; k < rows; k++, at++) {
      const offset = (pattern.offset[k] as number) + block * (pattern.blockStride[k] as number);
      const high = Math.floor(offset / 0x1_0000_0000);
      offsetHalves[2 * at] = offset - high * 0x1_0000_0000;
      offsetHalves[2 * at + 1] = high;
    }
  }
  return { ...pieces, regions: Uint32Array.from(table, (region) => region.id) };
}

/**
 * The 64-bit checksum of each block of `request.blocks` over the routes of the template's rank pair on one
 * side, computed where the bytes are: by the checksum kernel on the GPU for vram regions (only the sums
 * come back), on the host by the same function for dram. Both sides of a pull agree exactly when every
 * row moved to its place. Regions of one kind (vram: one GPU) per call.
 */
export function blockChecksums(agent: AgentContext, request: BlockChecksumsRequest): BigUint64Array {
  const blocks = request.blocks;
  if (!(blocks instanceof Uint32Array) && !Array.isArray(blocks))
    throw new InvalidArgumentError('blocks', blocks, 'must be a Uint32Array or an array of block indices');
  const sums = new BigUint64Array(blocks.length);
  if (blocks.length === 0) return sums;
  const pieces = piecesOf(agent, request);
  check(
    agent.library,
    'kvt_mem_checksums',
    agent.library.api.kvt_mem_checksums(
      agent.id,
      pieces.group.length,
      pieces.regionIndex,
      pieces.offset,
      pieces.length,
      pieces.group,
      pieces.ordinal,
      pieces.regions.length,
      pieces.regions,
      blocks.length,
      sums,
    ),
  );
  return sums;
}
