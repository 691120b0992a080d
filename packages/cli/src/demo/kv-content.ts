// The demo's KV cache content: deterministic bytes per (block hash, global layer, plane, global KV head),
// written in the rank's real layout. Any TP split of the same block therefore holds the same values for
// each head, so a pulled block can be checked byte for byte against what a prefill would have computed.
import { bytesPerElement, deriveShard, elementOffset, locatePiece, type RankPart } from '@kvreuse/descriptors';

/** One head's run of a block (tokens × head dim elements, in token order), from a seeded xorshift32. */
function headRun(hash: bigint, layer: number, plane: number, head: number, bytes: number): Uint8Array {
  // FNV-style mixing of the coordinates into a non-zero 32-bit seed.
  let seed = Number(BigInt.asUintN(32, hash ^ (hash >> 32n))) >>> 0;
  for (const value of [layer, plane, head]) seed = Math.imul(seed ^ value, 0x01000193) >>> 0;
  let state = seed === 0 ? 0x9e3779b9 : seed;
  const words = new Uint32Array(Math.ceil(bytes / 4));
  for (let i = 0; i < words.length; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    words[i] = state >>> 0;
  }
  return new Uint8Array(words.buffer, 0, bytes);
}

/** Calls `visit(bank, offset, run)` for every contiguous run of block `slot` of `part` that holds the content of `hash`. */
function eachRun(
  part: RankPart,
  slot: number,
  hash: bigint,
  visit: (bank: number, offset: number, run: Uint8Array) => void,
): void {
  const { geometry } = part;
  const shard = deriveShard(geometry, part.parallel);
  const element = bytesPerElement(geometry.dtype);
  const rowBytes = geometry.headDim * element;
  for (let localLayer = 0; localLayer < shard.layers.count; localLayer++) {
    for (let plane = 0; plane < geometry.kvPlanes; plane++) {
      const { bank, offset } = locatePiece(part, slot, localLayer, plane);
      for (let localHead = 0; localHead < shard.kvHeads.count; localHead++) {
        const run = headRun(
          hash,
          shard.layers.start + localLayer,
          plane,
          shard.kvHeads.start + localHead,
          geometry.blockTokens * rowBytes,
        );
        if (geometry.headOrder === 'HND') {
          visit(bank, Number(offset) + elementOffset(geometry, shard.kvHeads.count, localHead, 0, 0), run);
          continue;
        }
        for (let token = 0; token < geometry.blockTokens; token++) {
          visit(
            bank,
            Number(offset) + elementOffset(geometry, shard.kvHeads.count, localHead, token, 0),
            run.subarray(token * rowBytes, (token + 1) * rowBytes),
          );
        }
      }
    }
  }
}

/** Writes the content of block `hash` into block `slot` of the rank's banks (`banks[i]`: the bytes of bank i). */
export function writeBlockContent(part: RankPart, banks: readonly Uint8Array[], slot: number, hash: bigint): void {
  eachRun(part, slot, hash, (bank, offset, run) => (banks[bank] as Uint8Array).set(run, offset));
}

/** Whether block `slot` of the rank's banks holds exactly the content of block `hash`. */
export function holdsBlockContent(part: RankPart, banks: readonly Uint8Array[], slot: number, hash: bigint): boolean {
  let same = true;
  eachRun(part, slot, hash, (bank, offset, run) => {
    if (!same) return;
    const held = (banks[bank] as Uint8Array).subarray(offset, offset + run.length);
    same = Buffer.compare(held, run) === 0;
  });
  return same;
}
