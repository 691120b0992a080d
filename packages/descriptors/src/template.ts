import { checkedCompatibility, type RankRoute } from './compatibility.js';
import { IncompatibleWorkersError } from './errors.js';
import { bytesPerElement } from './geometry.js';
import { pieceSlot } from './layout.js';
import type { RankId } from './rank-id.js';
import type { RankPart } from './rank-part.js';
import { deriveShard } from './shard.js';
import type { Worker } from './worker.js';

/** The layout version of `TransferTemplate`'s arrays; a native consumer refuses formats it does not know. */
export const transferTemplateFormat = 1 as const;

export interface TemplateWorker {
  readonly workerId: string;
  readonly incarnation: string;
}

/** The fewest blocks of any bank one side of a template reads or writes, and which bank that is. */
export interface BlockLimit {
  /** Valid blocks on this side are `0 … blocks - 1`. */
  readonly blocks: number;
  readonly rank: RankId;
  readonly bank: number;
}

/**
 * Everything about moving blocks from one worker incarnation to another that does not depend on which
 * blocks, as flat typed arrays (struct of arrays) a native layer can take as they are.
 *
 * A route is one (layer, plane) of one rank pair. For route r and block pair (s, d), rows k = 0 … rows[r] − 1
 * each copy `rowBytes[r]` bytes from source bank `sourceBank[r]` at
 * `sourceBase[r] + s × sourceBlockStride[r] + k × sourceRowStride[r]` to destination bank
 * `destinationBank[r]` at `destinationBase[r] + d × destinationBlockStride[r] + k × destinationRowStride[r]`
 * (bank indices into the rank parts' `banks`, offsets from the bank's start). Routes of pair p are
 * `pairRouteStart[p] … pairRouteStart[p + 1] − 1`, in (layer, plane) order.
 */
export interface TransferTemplate {
  readonly format: typeof transferTemplateFormat;
  readonly source: TemplateWorker;
  readonly destination: TemplateWorker;
  readonly sourceLimit: BlockLimit;
  readonly destinationLimit: BlockLimit;
  /** The rank pairs with the heads and layers (global indices) each carries, in `checkCompatibility`'s order. */
  readonly pairs: readonly RankRoute[];
  /** Per pair: the rank's index in `Worker.ranks` (`ppRank × tpSize + tpRank`) on each side. */
  readonly pairSourceRank: Uint32Array;
  readonly pairDestinationRank: Uint32Array;
  /** `pairs.length + 1` entries. */
  readonly pairRouteStart: Uint32Array;
  readonly routeCount: number;
  /** Per route: global layer and plane, for naming a route in errors. */
  readonly layer: Uint32Array;
  readonly plane: Uint32Array;
  readonly sourceBank: Uint32Array;
  readonly destinationBank: Uint32Array;
  readonly sourceBase: BigUint64Array;
  readonly destinationBase: BigUint64Array;
  readonly sourceBlockStride: BigUint64Array;
  readonly destinationBlockStride: BigUint64Array;
  readonly rows: Uint32Array;
  readonly rowBytes: BigUint64Array;
  readonly sourceRowStride: BigUint64Array;
  readonly destinationRowStride: BigUint64Array;
  /** Bytes one block pair moves over all routes. */
  readonly blockBytes: bigint;
  /** Bytes of all the typed arrays above. */
  readonly byteLength: number;
}

/** The part of `rank` among a worker's checked `ranks` and its index there, as in `Worker.ranks`. */
function sideOf(ranks: readonly RankPart[], rank: RankId): { part: RankPart; index: number } {
  // Checked ranks hold one part per rank at its index, and routes come from checking these very workers, so
  // every rank of a route exists.
  const index = rank.ppRank * (ranks[0] as RankPart).parallel.tpSize + rank.tpRank;
  return { part: ranks[index] as RankPart, index };
}

/** Offset of head `head` (global) inside one piece of a rank holding `part`'s shard. */
function headStart(part: RankPart, head: number): number {
  const { geometry } = part;
  const shard = deriveShard(geometry, part.parallel);
  const perHead =
    (geometry.headOrder === 'HND' ? geometry.blockTokens : 1) * geometry.headDim * bytesPerElement(geometry.dtype);
  return (head - shard.kvHeads.start) * perHead;
}

/** One block's piece of a route as rows: HND is one run of the route's heads; NHD one run per token unless both sides hold exactly those heads. */
function segmentShape(
  route: RankRoute,
  from: RankPart,
  to: RankPart,
): { rows: number; rowBytes: number; sourceRowStride: number; destinationRowStride: number } {
  const { geometry } = from;
  const elementBytes = bytesPerElement(geometry.dtype);
  const headsRow = route.kvHeads.count * geometry.headDim * elementBytes;
  if (geometry.headOrder === 'HND') {
    const bytes = headsRow * geometry.blockTokens;
    return { rows: 1, rowBytes: bytes, sourceRowStride: bytes, destinationRowStride: bytes };
  }
  const sourceRowStride = deriveShard(geometry, from.parallel).kvHeads.count * geometry.headDim * elementBytes;
  const destinationRowStride = deriveShard(to.geometry, to.parallel).kvHeads.count * geometry.headDim * elementBytes;
  if (sourceRowStride === headsRow && destinationRowStride === headsRow) {
    const bytes = headsRow * geometry.blockTokens;
    return { rows: 1, rowBytes: bytes, sourceRowStride: bytes, destinationRowStride: bytes };
  }
  return { rows: geometry.blockTokens, rowBytes: headsRow, sourceRowStride, destinationRowStride };
}

/** Tracks the bank with the fewest blocks on one side. */
function limitTracker(): { see: (part: RankPart, bank: number) => void; limit: () => BlockLimit } {
  let best: BlockLimit | undefined;
  return {
    see(part, bank) {
      const blocks = (part.banks[bank] as RankPart['banks'][number]).blocks;
      if (best === undefined || blocks < best.blocks)
        best = { blocks, rank: { tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank }, bank };
    },
    // A compatible pair of workers has at least one route.
    limit: () => best as BlockLimit,
  };
}

/** A template's identity and its per-pair and per-route arrays, sized for `routeCount` routes and not yet filled. */
function allocateTemplate(source: Worker, destination: Worker, pairs: readonly RankRoute[], routeCount: number) {
  const u32 = (): Uint32Array => new Uint32Array(routeCount);
  const u64 = (): BigUint64Array => new BigUint64Array(routeCount);
  return {
    format: transferTemplateFormat,
    source: { workerId: source.workerId, incarnation: source.incarnation },
    destination: { workerId: destination.workerId, incarnation: destination.incarnation },
    pairs,
    pairSourceRank: new Uint32Array(pairs.length),
    pairDestinationRank: new Uint32Array(pairs.length),
    pairRouteStart: new Uint32Array(pairs.length + 1),
    routeCount,
    layer: u32(),
    plane: u32(),
    sourceBank: u32(),
    destinationBank: u32(),
    sourceBase: u64(),
    destinationBase: u64(),
    sourceBlockStride: u64(),
    destinationBlockStride: u64(),
    rows: u32(),
    rowBytes: u64(),
    sourceRowStride: u64(),
    destinationRowStride: u64(),
  };
}

/**
 * The transfer template from `source` to `destination` (two complete workers): built once per pair of
 * worker incarnations and cached by the caller, then used with two block lists per request
 * (`prepareTransfer`). Throws `IncompatibleWorkersError`, or `InvalidRankPartError` for an argument that is
 * not a complete worker, checked as `checkCompatibility` checks it (one valid rank part per rank, at its index,
 * with the worker's sizes and geometry).
 */
export function buildTransferTemplate(source: Worker, destination: Worker): TransferTemplate {
  const { result: compatibility, sourceRanks, destinationRanks } = checkedCompatibility(source, destination);
  if (!compatibility.ok) throw new IncompatibleWorkersError(compatibility.reasons);
  const { routes: pairs } = compatibility.mapping;
  const planes = source.geometry.kvPlanes;
  const routeCount = pairs.reduce((sum, pair) => sum + pair.layers.count * planes, 0);
  const template = allocateTemplate(source, destination, pairs, routeCount);
  const sourceLimit = limitTracker();
  const destinationLimit = limitTracker();
  let blockBytes = 0n;
  let r = 0;
  pairs.forEach((pair, p) => {
    const from = sideOf(sourceRanks, pair.sourceRank);
    const to = sideOf(destinationRanks, pair.destinationRank);
    template.pairSourceRank[p] = from.index;
    template.pairDestinationRank[p] = to.index;
    template.pairRouteStart[p] = r;
    const fromShard = deriveShard(from.part.geometry, from.part.parallel);
    const toShard = deriveShard(to.part.geometry, to.part.parallel);
    const fromHead = headStart(from.part, pair.kvHeads.start);
    const toHead = headStart(to.part, pair.kvHeads.start);
    const shape = segmentShape(pair, from.part, to.part);
    for (let layer = pair.layers.start; layer < pair.layers.start + pair.layers.count; layer++) {
      for (let plane = 0; plane < planes; plane++, r++) {
        const fromSlot = pieceSlot(
          from.part.geometry,
          fromShard,
          from.part.banks,
          layer - fromShard.layers.start,
          plane,
        );
        const toSlot = pieceSlot(to.part.geometry, toShard, to.part.banks, layer - toShard.layers.start, plane);
        sourceLimit.see(from.part, fromSlot.bank);
        destinationLimit.see(to.part, toSlot.bank);
        template.layer[r] = layer;
        template.plane[r] = plane;
        template.sourceBank[r] = fromSlot.bank;
        template.destinationBank[r] = toSlot.bank;
        template.sourceBase[r] = BigInt(fromSlot.within + fromHead);
        template.destinationBase[r] = BigInt(toSlot.within + toHead);
        template.sourceBlockStride[r] = (from.part.banks[fromSlot.bank] as RankPart['banks'][number]).blockStride;
        template.destinationBlockStride[r] = (to.part.banks[toSlot.bank] as RankPart['banks'][number]).blockStride;
        template.rows[r] = shape.rows;
        template.rowBytes[r] = BigInt(shape.rowBytes);
        template.sourceRowStride[r] = BigInt(shape.sourceRowStride);
        template.destinationRowStride[r] = BigInt(shape.destinationRowStride);
        blockBytes += BigInt(shape.rows * shape.rowBytes);
      }
    }
  });
  template.pairRouteStart[pairs.length] = r;
  const byteLength = Object.values(template).reduce(
    (sum: number, value) => sum + (ArrayBuffer.isView(value) ? value.byteLength : 0),
    0,
  );
  return {
    ...template,
    sourceLimit: sourceLimit.limit(),
    destinationLimit: destinationLimit.limit(),
    blockBytes,
    byteLength,
  };
}
