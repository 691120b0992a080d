import { type TransferTemplate, transferTemplateFormat } from '@kvreuse/descriptors';
import { ForeignHandleError, InvalidArgumentError } from './errors.js';
import type { AgentContext } from './handles.js';
import { type BlockRoutes, check } from './library.js';
import { Region } from './memory.js';

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

function pairOf(template: TransferTemplate, pair: number | undefined): number {
  const chosen = pair ?? (template.pairs.length === 1 ? 0 : undefined);
  if (chosen === undefined || !Number.isInteger(chosen) || chosen < 0 || chosen >= template.pairs.length)
    throw new InvalidArgumentError('pair', pair, `must be an integer in 0 … ${template.pairs.length - 1}`);
  return chosen;
}

/** The region of `bank`, as an index into the table of regions the call reads (added on first use). */
function regionSlot(agent: AgentContext, request: BlockChecksumsRequest, bank: number, table: Region[]): number {
  const region = request.regions[bank];
  if (!(region instanceof Region))
    throw new InvalidArgumentError(`regions[${bank}]`, region, `must be the ${request.side} region of bank ${bank}`);
  if (!region.belongsTo(agent)) throw new ForeignHandleError('Region', `${region.id} (regions[${bank}])`, agent.name);
  region.assertOpen('compute checksums');
  const known = table.indexOf(region);
  return known >= 0 ? known : table.push(region) - 1;
}

/** The routes of the request's pair on its side, as the native call reads them: the template's own arrays. */
function routesOf(agent: AgentContext, request: BlockChecksumsRequest): BlockRoutes {
  const { template, side } = request;
  if (typeof template !== 'object' || template === null || template.format !== transferTemplateFormat) {
    throw new InvalidArgumentError(
      'template',
      template,
      `must come from buildTransferTemplate (format ${transferTemplateFormat})`,
    );
  }
  if (!Array.isArray(request.regions))
    throw new InvalidArgumentError('regions', request.regions, 'must be an array of regions this agent registered');
  if (side !== 'source' && side !== 'destination')
    throw new InvalidArgumentError('side', side, "must be 'source' or 'destination'");
  const pair = pairOf(template, request.pair);
  const [first, end] = [template.pairRouteStart[pair] as number, template.pairRouteStart[pair + 1] as number];
  const routes = <T extends Uint32Array | BigUint64Array>(array: T): T => array.subarray(first, end) as T;
  const table: Region[] = [];
  const banks = routes(template[`${side}Bank`]);
  const regionIndex = Uint32Array.from(banks, (bank) => regionSlot(agent, request, bank, table));
  return {
    route_count: end - first,
    region_index: regionIndex,
    base: routes(template[`${side}Base`]),
    block_stride: routes(template[`${side}BlockStride`]),
    rows: routes(template.rows),
    row_bytes: routes(template.rowBytes),
    row_stride: routes(template[`${side}RowStride`]),
    region_count: table.length,
    regions: Uint32Array.from(table, (region) => region.id),
  };
}

/** The block list as the uint32s the native call reads. */
function blockList(blocks: Uint32Array | readonly number[]): Uint32Array {
  if (blocks instanceof Uint32Array) return blocks;
  if (!Array.isArray(blocks))
    throw new InvalidArgumentError('blocks', blocks, 'must be a Uint32Array or an array of block indices');
  blocks.forEach((block, i) => {
    if (!Number.isInteger(block) || block < 0 || block > 0xffff_ffff)
      throw new InvalidArgumentError(`blocks[${i}]`, block, 'must be a block index (a uint32)');
  });
  return Uint32Array.from(blocks);
}

/**
 * The 64-bit checksum of each block of `request.blocks` over the routes of the template's rank pair on one
 * side, computed where the bytes are: by the checksum kernel on the GPU for vram regions (only the sums
 * come back), on the host by the same function for dram. Both sides of a pull agree exactly when every
 * row moved to its place. Regions of one kind (vram: one GPU) per call. The native call takes the pair's
 * routes and the blocks as they are (`kvt_mem_block_checksums`): nothing is built per row, here or in C.
 */
export function blockChecksums(agent: AgentContext, request: BlockChecksumsRequest): BigUint64Array {
  const blocks = blockList(request.blocks);
  const sums = new BigUint64Array(blocks.length);
  if (blocks.length === 0) return sums;
  const routes = routesOf(agent, request);
  check(
    agent.library,
    'kvt_mem_block_checksums',
    agent.library.api.kvt_mem_block_checksums(agent.id, routes, blocks.length, blocks, sums),
  );
  return sums;
}
