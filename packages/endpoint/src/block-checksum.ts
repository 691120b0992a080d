// The per-block checksum both sides of a pull compute: the source over the bytes it will serve, the
// destination over the bytes it received. Both walk the same template routes of one rank pair in
// route order and hash the same rows, so the two agree exactly when every byte moved to its place,
// whatever the TP split or head order (only the offsets differ between the sides).
import { crc32 } from 'node:zlib';
import type { TransferTemplate } from '@kvreuse/descriptors';
import { EndpointOptionError } from './errors.js';

/** Whose banks a checksum reads: the pair's source rank or its destination rank. */
export type ChecksumSide = 'source' | 'destination';

/** One rank's bank bytes, indexed by its bank numbers (e.g. `allocation.view()` of each bank); banks the pair does not touch may be absent. */
export type RankBankBytes = readonly (Uint8Array | undefined)[];

/** The routes of `pair` on `side`, as numbers, after checking the pair exists. */
function pairRoutes(template: TransferTemplate, pair: number, side: ChecksumSide) {
  if (!Number.isInteger(pair) || pair < 0 || pair >= template.pairs.length) {
    throw new EndpointOptionError(
      'pair',
      pair,
      `must be an integer in 0 … ${template.pairs.length - 1} (the template's rank pairs)`,
    );
  }
  if (side !== 'source' && side !== 'destination')
    throw new EndpointOptionError('side', side, "must be 'source' or 'destination'");
  const first = template.pairRouteStart[pair] as number;
  const end = template.pairRouteStart[pair + 1] as number;
  const onSource = side === 'source';
  const routes = [];
  for (let r = first; r < end; r++) {
    routes.push({
      route: r,
      bank: (onSource ? template.sourceBank[r] : template.destinationBank[r]) as number,
      base: Number(onSource ? template.sourceBase[r] : template.destinationBase[r]),
      blockStride: Number(onSource ? template.sourceBlockStride[r] : template.destinationBlockStride[r]),
      rowStride: Number(onSource ? template.sourceRowStride[r] : template.destinationRowStride[r]),
      rows: template.rows[r] as number,
      rowBytes: Number(template.rowBytes[r]),
    });
  }
  return routes;
}

/**
 * The CRC-32 of each block of `blocks` (block indices of `side`'s rank) over the routes of rank pair
 * `pair`, chained over the rows in route order. Throws `EndpointOptionError` naming the bank when a
 * bank is absent or too short for a row.
 */
export function blockChecksums(
  template: TransferTemplate,
  pair: number,
  side: ChecksumSide,
  banks: RankBankBytes,
  blocks: Uint32Array | readonly number[],
): Uint32Array {
  const routes = pairRoutes(template, pair, side);
  const sums = new Uint32Array(blocks.length);
  const listed = !(blocks instanceof Uint32Array);
  for (let i = 0; i < blocks.length; i++) {
    const block = blocks[i] as number;
    // A negative or fractional index would read other bytes (a negative offset counts from the end).
    if (listed && !(Number.isSafeInteger(block) && block >= 0))
      throw new EndpointOptionError(`blocks[${i}]`, block, 'a block index is a whole number ≥ 0');
    let crc = 0;
    for (const { route, bank, base, blockStride, rowStride, rows, rowBytes } of routes) {
      const bytes = banks[bank];
      if (!(bytes instanceof Uint8Array)) {
        throw new EndpointOptionError(
          `banks[${bank}]`,
          bytes,
          `must be the bytes of ${side} bank ${bank} (route ${route} of pair ${pair} reads it)`,
        );
      }
      let offset = base + block * blockStride;
      const last = offset + (rows - 1) * rowStride + rowBytes;
      if (last > bytes.length) {
        throw new EndpointOptionError(
          `banks[${bank}]`,
          `${bytes.length} bytes`,
          `block ${block} of route ${route} ends at byte ${last}: the ${side} bank is too short`,
        );
      }
      for (let k = 0; k < rows; k++, offset += rowStride) crc = crc32(bytes.subarray(offset, offset + rowBytes), crc);
    }
    sums[i] = crc;
  }
  return sums;
}

/** The checksum of one block; see `blockChecksums`. */
export function blockChecksum(
  template: TransferTemplate,
  pair: number,
  side: ChecksumSide,
  banks: RankBankBytes,
  block: number,
): number {
  return blockChecksums(template, pair, side, banks, [block])[0] as number;
}
