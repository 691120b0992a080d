import { expect } from 'vitest';
import type { Geometry, RankPart, TransferPlan, TransferTemplate, Worker } from '../src/index.js';

// Everything below locates bytes from first principles, independently of the planner and of the
// package's layout helpers: the expected destination comes from a logical-position → value function.

export const elementSize = { fp32: 4, bf16: 2, fp16: 2, fp8_e4m3: 1, fp8_e5m2: 1, int8: 1 } as const;

export function holds(
  geometry: Geometry,
  part: RankPart,
): { headStart: number; headCount: number; layerStart: number; layerCount: number } {
  const { tpRank, tpSize, ppRank, ppSize } = part.parallel;
  const heads = geometry.numKvHeads;
  const headCount = tpSize <= heads ? heads / tpSize : 1;
  const headStart = tpSize <= heads ? tpRank * headCount : Math.floor(tpRank / (tpSize / heads));
  const layerCount = geometry.numLayers / ppSize;
  return { headStart, headCount, layerStart: ppRank * layerCount, layerCount };
}

interface Position {
  block: number;
  layer: number;
  plane: number;
  head: number;
  token: number;
  dim: number;
  byte: number;
}

/** Bank and byte offset of a logical position in a rank, or undefined when the rank does not hold it. */
function locate(geometry: Geometry, part: RankPart, p: Position): { bank: number; offset: number } | undefined {
  const { headStart, headCount, layerStart, layerCount } = holds(geometry, part);
  if (
    p.head < headStart ||
    p.head >= headStart + headCount ||
    p.layer < layerStart ||
    p.layer >= layerStart + layerCount
  )
    return undefined;
  const size = elementSize[geometry.dtype];
  const { blockTokens: T, headDim: D, kvPlanes: P } = geometry;
  const head = p.head - headStart;
  const element =
    geometry.headOrder === 'HND' ? (head * T + p.token) * D + p.dim : (p.token * headCount + head) * D + p.dim;
  const inPiece = element * size + p.byte;
  const layerPlane = (p.layer - layerStart) * P + p.plane;
  // Plane-strided: one bank per local layer, plane p at p × planeStride inside each block.
  const planeStride = part.banks[0]!.planeStride;
  const bank =
    geometry.bankLayout === 'fully-contiguous' ? 0 : planeStride === undefined ? layerPlane : p.layer - layerStart;
  const stride = Number(part.banks[bank]!.blockStride);
  const pieceOffset =
    geometry.bankLayout === 'fully-contiguous'
      ? layerPlane * T * headCount * D * size
      : planeStride === undefined
        ? 0
        : p.plane * Number(planeStride);
  return { bank, offset: p.block * stride + pieceOffset + inPiece };
}

function* positions(geometry: Geometry, blocks: number): Generator<Position> {
  const size = elementSize[geometry.dtype];
  for (let block = 0; block < blocks; block++)
    for (let layer = 0; layer < geometry.numLayers; layer++)
      for (let plane = 0; plane < geometry.kvPlanes; plane++)
        for (let head = 0; head < geometry.numKvHeads; head++)
          for (let token = 0; token < geometry.blockTokens; token++)
            for (let dim = 0; dim < geometry.headDim; dim++)
              for (let byte = 0; byte < size; byte++) yield { block, layer, plane, head, token, dim, byte };
}

/** The value the model defines at a logical position of the source (a 32-bit mix, one byte of it). */
function valueAt(p: Position): number {
  let x = (((((p.block * 131 + p.layer) * 7 + p.plane) * 257 + p.head) * 521 + p.token) * 1031 + p.dim) * 8 + p.byte;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) & 0xff;
}

type Memory = Uint8Array[][]; // [rank index][bank]

function allocate(worker: Worker, fill: (rank: number, bank: number, offset: number) => number): Memory {
  return worker.ranks.map((part, rank) =>
    part.banks.map((bank, index) => {
      const memory = new Uint8Array(Number(bank.bytes));
      for (let offset = 0; offset < memory.length; offset++) memory[offset] = fill(rank, index, offset);
      return memory;
    }),
  );
}

function fillSource(worker: Worker, memory: Memory, blocks: number): void {
  for (const p of positions(worker.geometry, blocks)) {
    worker.ranks.forEach((part, rank) => {
      const at = locate(worker.geometry, part, p);
      if (at !== undefined) memory[rank]![at.bank]![at.offset] = valueAt(p);
    });
  }
}

function execute(
  plan: TransferPlan,
  source: Worker,
  sourceMemory: Memory,
  destination: Worker,
  destinationMemory: Memory,
): void {
  for (const pair of plan.pairs) {
    const from = sourceMemory[pair.sourceRank.ppRank * source.tpSize + pair.sourceRank.tpRank]!;
    const to = destinationMemory[pair.destinationRank.ppRank * destination.tpSize + pair.destinationRank.tpRank]!;
    for (let i = 0; i < pair.count; i++) {
      const length = Number(pair.length[i]);
      const sourceBank = from[pair.sourceBank[i]!]!;
      const destinationBank = to[pair.destinationBank[i]!]!;
      const sourceOffset = Number(pair.sourceOffset[i]);
      const destinationOffset = Number(pair.destinationOffset[i]);
      expect(length).toBeGreaterThan(0);
      expect(sourceOffset + length).toBeLessThanOrEqual(sourceBank.length);
      expect(destinationOffset + length).toBeLessThanOrEqual(destinationBank.length);
      destinationBank.set(sourceBank.subarray(sourceOffset, sourceOffset + length), destinationOffset);
    }
  }
}

/** Executes a template's segments themselves, row by row, as a native expansion would (no descriptors). */
function executeTemplate(
  template: TransferTemplate,
  blocks: readonly (readonly [number, number])[],
  sourceMemory: Memory,
  destinationMemory: Memory,
): void {
  template.pairs.forEach((_pair, p) => {
    const from = sourceMemory[template.pairSourceRank[p]!]!;
    const to = destinationMemory[template.pairDestinationRank[p]!]!;
    for (let r = template.pairRouteStart[p]!; r < template.pairRouteStart[p + 1]!; r++) {
      const sourceBank = from[template.sourceBank[r]!]!;
      const destinationBank = to[template.destinationBank[r]!]!;
      const rowBytes = Number(template.rowBytes[r]);
      for (const [sourceBlock, destinationBlock] of blocks) {
        for (let row = 0; row < template.rows[r]!; row++) {
          const sourceOffset = Number(
            template.sourceBase[r]! +
              BigInt(sourceBlock) * template.sourceBlockStride[r]! +
              BigInt(row) * template.sourceRowStride[r]!,
          );
          const destinationOffset = Number(
            template.destinationBase[r]! +
              BigInt(destinationBlock) * template.destinationBlockStride[r]! +
              BigInt(row) * template.destinationRowStride[r]!,
          );
          expect(sourceOffset + rowBytes).toBeLessThanOrEqual(sourceBank.length);
          expect(destinationOffset + rowBytes).toBeLessThanOrEqual(destinationBank.length);
          for (let byte = 0; byte < rowBytes; byte++)
            destinationBank[destinationOffset + byte] = sourceBank[sourceOffset + byte]!;
        }
      }
    }
  });
}

const untouched = (rank: number, bank: number, offset: number): number =>
  (rank * 97 + bank * 31 + offset * 7 + 1) & 0xff;

/**
 * Simulated banks for `source` (filled with `valueAt` over every block) and `destination` (filled with a
 * pattern), and what the destination must hold after copying `blocks`, worked out from the logical
 * positions alone. `run(plan)` executes a plan's descriptors on fresh destination memory and returns it;
 * `runTemplate(template)` executes a template's segments for `blocks` the same way.
 */
export function simulation(
  source: Worker,
  destination: Worker,
  blocks: readonly (readonly [number, number])[],
): { expected: Memory; run: (plan: TransferPlan) => Memory; runTemplate: (template: TransferTemplate) => Memory } {
  const sourceMemory = allocate(source, () => 0);
  fillSource(source, sourceMemory, source.ranks[0]!.banks[0]!.blocks);
  const expected = allocate(destination, untouched);
  const sourceOf = new Map(blocks.map(([from, to]) => [to, from]));
  for (const p of positions(destination.geometry, destination.ranks[0]!.banks[0]!.blocks)) {
    const from = sourceOf.get(p.block);
    if (from === undefined) continue;
    const value = valueAt({ ...p, block: from });
    destination.ranks.forEach((part, rank) => {
      const at = locate(destination.geometry, part, p);
      if (at !== undefined) expected[rank]![at.bank]![at.offset] = value;
    });
  }
  const run = (plan: TransferPlan): Memory => {
    const actual = allocate(destination, untouched);
    execute(plan, source, sourceMemory, destination, actual);
    return actual;
  };
  const runTemplate = (template: TransferTemplate): Memory => {
    const actual = allocate(destination, untouched);
    executeTemplate(template, blocks, sourceMemory, actual);
    return actual;
  };
  return { expected, run, runTemplate };
}

/** Where two simulated memories first differ, or undefined when they are equal. */
export function firstDifference(actual: Memory, expected: Memory): string | undefined {
  for (const [rank, banks] of expected.entries()) {
    for (const [bank, bytes] of banks.entries()) {
      const other = actual[rank]![bank]!;
      if (Buffer.compare(other, bytes) === 0) continue;
      const offset = bytes.findIndex((byte, i) => other[i] !== byte);
      return `rank index ${rank}, bank ${bank}, offset ${offset}: expected ${bytes[offset]}, got ${other[offset]}`;
    }
  }
  return undefined;
}
