// The reference planner: the explicit descriptors of a transfer, derived straight from the two workers'
// geometry, shards and banks, one (layer, plane, block, segment) at a time. It is the test oracle of the
// transfer path (buildTransferTemplate → prepareTransfer / materialize): the tests assert that a
// materialized template equals its plan, descriptor for descriptor. It is not part of the package's API —
// writing millions of descriptors per request is what the template path avoids.
import { type CompatibilityResult, checkCompatibility, type RankRoute } from '../src/compatibility.js';
import { blocksOutermost, DescriptorWriter } from '../src/descriptor-writer.js';
import {
  BlockOutOfRangeError,
  DuplicateDestinationBlockError,
  IncompatibleWorkersError,
  InvalidBlockListError,
} from '../src/errors.js';
import { bytesPerElement } from '../src/geometry.js';
import { pieceSlot } from '../src/layout.js';
import type { RankId } from '../src/rank-id.js';
import type { RankPart } from '../src/rank-part.js';
import { deriveShard, type Shard } from '../src/shard.js';
import type { PlanOptions, RankPairPlan, TransferPlan } from '../src/transfer-plan.js';
import { rankPartOf, type Worker } from '../src/worker.js';

/**
 * Which blocks to move: `[sourceBlock, destinationBlock]` pairs, or the same as two equally long
 * `Uint32Array`s.
 */
type BlockPairs =
  | readonly (readonly [number, number])[]
  | { readonly sourceBlocks: Uint32Array; readonly destinationBlocks: Uint32Array };

const MAX_BLOCK = 0xffff_ffff;
const isBlockIndex = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_BLOCK;

function toBlockArrays(blocks: BlockPairs): { source: Uint32Array; destination: Uint32Array } {
  if (!Array.isArray(blocks)) {
    if (typeof blocks !== 'object' || blocks === null) {
      throw new InvalidBlockListError(
        undefined,
        blocks,
        'must be an array of pairs or { sourceBlocks, destinationBlocks }',
      );
    }
    const { sourceBlocks, destinationBlocks } = blocks as Exclude<BlockPairs, readonly unknown[]>;
    if (!(sourceBlocks instanceof Uint32Array) || !(destinationBlocks instanceof Uint32Array)) {
      throw new InvalidBlockListError(undefined, blocks, 'sourceBlocks and destinationBlocks must be Uint32Arrays');
    }
    if (sourceBlocks.length !== destinationBlocks.length) {
      const lengths = { sourceBlocks: sourceBlocks.length, destinationBlocks: destinationBlocks.length };
      throw new InvalidBlockListError(
        Math.min(sourceBlocks.length, destinationBlocks.length),
        lengths,
        'sourceBlocks and destinationBlocks must be equally long',
      );
    }
    return { source: sourceBlocks, destination: destinationBlocks };
  }
  const pairs = blocks as readonly unknown[];
  const source = new Uint32Array(pairs.length);
  const destination = new Uint32Array(pairs.length);
  for (let index = 0; index < pairs.length; index++) {
    const pair = pairs[index];
    if (!Array.isArray(pair) || pair.length !== 2 || !isBlockIndex(pair[0]) || !isBlockIndex(pair[1])) {
      throw new InvalidBlockListError(
        index,
        pair,
        'must be a [sourceBlock, destinationBlock] pair of integers in [0, 2^32)',
      );
    }
    source[index] = pair[0];
    destination[index] = pair[1];
  }
  return { source, destination };
}

/** One side of a route: the rank part, its shard and, per (layer, plane) of the route, bank, base offset and stride. */
interface RouteSide {
  readonly rank: RankId;
  readonly part: RankPart;
  readonly shard: Shard;
  readonly bankOf: Uint32Array;
  readonly baseOf: Float64Array;
  readonly strideOf: Float64Array;
}

function routeSide(worker: Worker, rank: RankId, route: RankRoute): RouteSide {
  // Routes come from checkCompatibility over these very workers, so every rank exists.
  const part = rankPartOf(worker, rank) as RankPart;
  const { geometry } = part;
  const shard = deriveShard(geometry, part.parallel);
  const planes = geometry.kvPlanes;
  const layerPlanes = route.layers.count * planes;
  const bankOf = new Uint32Array(layerPlanes);
  const baseOf = new Float64Array(layerPlanes);
  const strideOf = new Float64Array(layerPlanes);
  // Where the route's first head starts inside a piece: HND [head][token][dim], NHD [token][head][dim].
  const headOffset =
    (route.kvHeads.start - shard.kvHeads.start) *
    (geometry.headOrder === 'HND' ? geometry.blockTokens : 1) *
    geometry.headDim *
    bytesPerElement(geometry.dtype);
  for (let lp = 0; lp < layerPlanes; lp++) {
    const localLayer = route.layers.start - shard.layers.start + Math.floor(lp / planes);
    const { bank, within } = pieceSlot(geometry, shard, part.banks, localLayer, lp % planes);
    bankOf[lp] = bank;
    baseOf[lp] = within + headOffset;
    strideOf[lp] = Number((part.banks[bank] as RankPart['banks'][number]).blockStride);
  }
  return { rank, part, shard, bankOf, baseOf, strideOf };
}

/** Throws for the first block of `blocks` that lies outside one of the banks `side` touches. */
function checkBlockRange(kind: 'source' | 'destination', side: RouteSide, blocks: Uint32Array, largest: number): void {
  for (const bank of new Set(side.bankOf)) {
    const capacity = (side.part.banks[bank] as RankPart['banks'][number]).blocks;
    if (largest < capacity) continue;
    const index = blocks.findIndex((block) => block >= capacity);
    throw new BlockOutOfRangeError(kind, side.rank, bank, blocks[index] as number, capacity, index);
  }
}

function checkDistinctDestinations(destination: Uint32Array, largest: number): void {
  const writer = new Uint32Array(largest + 1); // index + 1 of the pair that writes each block
  for (let index = 0; index < destination.length; index++) {
    const block = destination[index] as number;
    const earlier = writer[block] as number;
    if (earlier !== 0) throw new DuplicateDestinationBlockError(block, earlier - 1, index);
    writer[block] = index + 1;
  }
}

const largestOf = (blocks: Uint32Array): number => blocks.reduce((max, block) => (block > max ? block : max), 0);

interface Route {
  readonly route: RankRoute;
  readonly from: RouteSide;
  readonly to: RouteSide;
}

function planRoute(
  { route, from, to }: Route,
  blocks: { source: Uint32Array; destination: Uint32Array },
  coalesce: boolean,
): RankPairPlan {
  const geometry = from.part.geometry;
  const elementBytes = bytesPerElement(geometry.dtype);
  const { blockTokens, headDim } = geometry;
  const headCount = route.kvHeads.count;
  const hnd = geometry.headOrder === 'HND';
  // HND keeps the copied heads in one run per piece; NHD has one run per token unless both sides hold
  // exactly these heads.
  const rowBytes = headCount * headDim * elementBytes;
  const sourceRow = from.shard.kvHeads.count * headDim * elementBytes;
  const destinationRow = to.shard.kvHeads.count * headDim * elementBytes;
  const contiguous = hnd || (rowBytes === sourceRow && rowBytes === destinationRow);
  const segments = contiguous ? 1 : blockTokens;
  const segmentBytes = contiguous ? rowBytes * blockTokens : rowBytes;

  const n = blocks.source.length;
  const layerPlanes = from.bankOf.length;
  const capacity = n * layerPlanes * segments;
  const writer = new DescriptorWriter(capacity, coalesce);
  const blocksOuter = blocksOutermost(from.bankOf, to.bankOf);
  const outerCount = blocksOuter ? n : layerPlanes;
  const innerCount = blocksOuter ? layerPlanes : n;
  const { source: sourceBlocks, destination: destinationBlocks } = blocks;
  const { bankOf: sourceBankOf, baseOf: sourceBaseOf, strideOf: sourceStrideOf } = from;
  const { bankOf: destinationBankOf, baseOf: destinationBaseOf, strideOf: destinationStrideOf } = to;
  for (let outer = 0; outer < outerCount; outer++) {
    for (let inner = 0; inner < innerCount; inner++) {
      const lp = blocksOuter ? inner : outer;
      const i = blocksOuter ? outer : inner;
      const sBank = sourceBankOf[lp] as number;
      const dBank = destinationBankOf[lp] as number;
      let sOffset = (sourceBaseOf[lp] as number) + (sourceBlocks[i] as number) * (sourceStrideOf[lp] as number);
      let dOffset =
        (destinationBaseOf[lp] as number) + (destinationBlocks[i] as number) * (destinationStrideOf[lp] as number);
      for (let segment = 0; segment < segments; segment++) {
        writer.add(sBank, dBank, sOffset, dOffset, segmentBytes);
        sOffset += sourceRow;
        dOffset += destinationRow;
      }
    }
  }
  return {
    sourceRank: route.sourceRank,
    destinationRank: route.destinationRank,
    kvHeads: route.kvHeads,
    layers: route.layers,
    ...writer.finish(),
    bytes: BigInt(capacity) * BigInt(segmentBytes),
  };
}

/**
 * Plans copying `blocks` from `source` to `destination` (two complete, compatible workers): one list of
 * descriptors per rank pair, adjacent ranges coalesced, as `materialize` gives them. Throws `IncompatibleWorkersError`, `InvalidBlockListError`, `BlockOutOfRangeError` or
 * `DuplicateDestinationBlockError`.
 */
export function referencePlan(
  source: Worker,
  destination: Worker,
  blocks: BlockPairs,
  options: PlanOptions = {},
): TransferPlan {
  const compatibility: CompatibilityResult = checkCompatibility(source, destination);
  if (!compatibility.ok) throw new IncompatibleWorkersError(compatibility.reasons);
  const arrays = toBlockArrays(blocks);
  if (arrays.source.length === 0) return { pairs: [], totalBytes: 0n, descriptorCount: 0 };

  const largestSource = largestOf(arrays.source);
  const largestDestination = largestOf(arrays.destination);
  const routes: Route[] = compatibility.mapping.routes.map((route) => ({
    route,
    from: routeSide(source, route.sourceRank, route),
    to: routeSide(destination, route.destinationRank, route),
  }));
  for (const { from, to } of routes) {
    checkBlockRange('source', from, arrays.source, largestSource);
    checkBlockRange('destination', to, arrays.destination, largestDestination);
  }
  checkDistinctDestinations(arrays.destination, largestDestination);

  const coalesce = options.coalesce ?? true;
  const pairs = routes.map((route) => planRoute(route, arrays, coalesce));
  return {
    pairs,
    totalBytes: pairs.reduce((sum, pair) => sum + pair.bytes, 0n),
    descriptorCount: pairs.reduce((sum, pair) => sum + pair.count, 0),
  };
}
