import { describe, expect, it } from 'vitest';
import { firstDifference, simulation } from '../test/simulation.js';
import { workerFor } from '../test/support.js';
import { referencePlan } from '../test/reference-planner.js';
import {
  BlockOutOfRangeError,
  DuplicateDestinationBlockError,
  type Geometry,
  IncompatibleWorkersError,
  InvalidBlockListError,
  referenceGeometries,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const prefix = Array.from({ length: 42 }, (_, i) => [i, i] as [number, number]);

describe('referencePlan on the reference geometry', () => {
  const decodeTp2 = workerFor({ geometry: qwen, tpSize: 2, ppSize: 1, blocks: 64 });
  const prefillTp1 = workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 64, role: 'prefill' });

  it('pulls a 42-block prefix from decode TP=2 into prefill TP=1: 308,281,344 bytes in 2 × 2,352 pieces', () => {
    const plan = referencePlan(decodeTp2, prefillTp1, prefix);
    expect(plan.totalBytes).toBe(308_281_344n);
    expect(plan.pairs.map((pair) => [pair.sourceRank, pair.destinationRank, pair.count, pair.bytes])).toEqual([
      [{ tpRank: 0, ppRank: 0 }, { tpRank: 0, ppRank: 0 }, 2352, 154_140_672n],
      [{ tpRank: 1, ppRank: 0 }, { tpRank: 0, ppRank: 0 }, 2352, 154_140_672n],
    ]);
    expect(plan.descriptorCount).toBe(4704);
    const [first, second] = plan.pairs;
    // Rank 1's four heads land in the second half of every 131,072-byte destination piece.
    expect([
      first!.destinationOffset[1],
      second!.destinationOffset[1],
      second!.sourceOffset[1],
      second!.length[1],
    ]).toEqual([131_072n, 196_608n, 65_536n, 65_536n]);
    expect([second!.sourceBank[42], second!.destinationBank[42]]).toEqual([1, 1]);
  });

  it('coalesces the same prefix between equal workers into one descriptor per bank', () => {
    const plan = referencePlan(prefillTp1, prefillTp1, prefix);
    expect(plan.descriptorCount).toBe(56);
    expect(plan.pairs[0]!.length[0]).toBe(42n * 131_072n);
    expect(plan.totalBytes).toBe(308_281_344n);
  });

  it('plans the same from typed arrays as from pairs', () => {
    const sourceBlocks = Uint32Array.from(prefix, ([source]) => source);
    const destinationBlocks = Uint32Array.from(prefix, ([, destination]) => destination);
    expect(referencePlan(decodeTp2, prefillTp1, { sourceBlocks, destinationBlocks })).toEqual(
      referencePlan(decodeTp2, prefillTp1, prefix),
    );
  });

  it('plans nothing for no blocks', () => {
    expect(referencePlan(decodeTp2, prefillTp1, [])).toEqual({ pairs: [], totalBytes: 0n, descriptorCount: 0 });
  });

  it('rejects blocks outside a bank, naming side, rank, bank, block and index', () => {
    const error = (() => {
      try {
        referencePlan(decodeTp2, prefillTp1, [
          [0, 0],
          [64, 1],
        ]);
      } catch (thrown) {
        return thrown;
      }
    })();
    expect(error).toBeInstanceOf(BlockOutOfRangeError);
    expect(error).toMatchObject({
      code: 'BLOCK_OUT_OF_RANGE',
      side: 'source',
      rank: { tpRank: 0, ppRank: 0 },
      bank: 0,
      block: 64,
      blocks: 64,
      index: 1,
    });
    expect(() => referencePlan(decodeTp2, prefillTp1, [[0, 70]])).toThrow(/destination block 70 .* holds 64 blocks/);
  });

  it('rejects a destination block written twice', () => {
    expect(() =>
      referencePlan(decodeTp2, prefillTp1, [
        [0, 3],
        [1, 4],
        [2, 3],
      ]),
    ).toThrow(DuplicateDestinationBlockError);
    expect(() =>
      referencePlan(decodeTp2, prefillTp1, [
        [0, 3],
        [1, 4],
        [2, 3],
      ]),
    ).toThrow(/destination block 3 is written twice, by block list indices 0 and 2/);
  });

  it('accepts one source block read into several destination blocks', () => {
    expect(
      referencePlan(decodeTp2, prefillTp1, [
        [5, 0],
        [5, 1],
      ]).totalBytes,
    ).toBe(2n * 7_340_032n);
  });

  it('rejects malformed block lists with the index and value', () => {
    const bad: unknown[] = [
      [0, 0],
      [1, -1],
    ];
    expect(() => referencePlan(decodeTp2, prefillTp1, bad as [number, number][])).toThrow(InvalidBlockListError);
    expect(() =>
      referencePlan(decodeTp2, prefillTp1, [
        [0, 0],
        [1.5, 2],
      ]),
    ).toThrow(/index 1: \[1\.5,2\]/);
    expect(() => referencePlan(decodeTp2, prefillTp1, [[0]] as unknown as [number, number][])).toThrow(
      InvalidBlockListError,
    );
    expect(() =>
      referencePlan(decodeTp2, prefillTp1, { sourceBlocks: new Uint32Array(2), destinationBlocks: new Uint32Array(3) }),
    ).toThrow(/equally long/);
    expect(() =>
      referencePlan(decodeTp2, prefillTp1, { sourceBlocks: [1], destinationBlocks: [1] } as unknown as [
        number,
        number,
      ][]),
    ).toThrow(/must be Uint32Arrays/);
    expect(() => referencePlan(decodeTp2, prefillTp1, null as unknown as [number, number][])).toThrow(
      expect.objectContaining({
        code: 'INVALID_BLOCK_LIST',
        index: undefined,
        message: 'invalid block list: null: must be an array of pairs or { sourceBlocks, destinationBlocks }',
      }),
    );
  });

  it('refuses incompatible workers with the reasons', () => {
    const llama = workerFor({ geometry: referenceGeometries['llama-3.1-8b'], tpSize: 1, ppSize: 1, blocks: 8 });
    expect(() => referencePlan(llama, prefillTp1, [[0, 0]])).toThrow(IncompatibleWorkersError);
    expect(() => referencePlan(llama, prefillTp1, [[0, 0]])).toThrow(
      /NUM_LAYERS_MISMATCH: source numLayers is 32, destination numLayers is 28/,
    );
  });
});

describe('referencePlan coalescing', () => {
  const small = (bankLayout: Geometry['bankLayout']): Geometry => ({
    numLayers: 2,
    kvPlanes: 2,
    blockTokens: 2,
    numKvHeads: 2,
    headDim: 2,
    dtype: 'int8',
    bankLayout,
    headOrder: 'HND',
  });

  it('never merges across destination banks, even where the offsets would continue', () => {
    // Fully contiguous source pieces follow each other; destination bank l+1 starts where bank l's
    // last copied range ended (as an offset), so only the bank index tells them apart.
    const source = workerFor({ geometry: small('fully-contiguous'), tpSize: 1, ppSize: 1, blocks: 2 });
    const destination = workerFor({
      geometry: small('layer-separate'),
      tpSize: 1,
      ppSize: 1,
      blocks: 2,
      role: 'prefill',
    });
    const blocks = [
      [0, 1],
      [0, 0],
    ] as [number, number][];
    const plan = referencePlan(source, destination, blocks);
    expect(plan.descriptorCount).toBe(8);
    const { expected, run } = simulation(source, destination, blocks);
    expect(firstDifference(run(plan), expected)).toBeUndefined();
  });

  it('merges whole consecutive blocks of fully-contiguous workers into one descriptor', () => {
    // One head per rank: 4-byte pieces, 16-byte blocks.
    const source = workerFor({ geometry: small('fully-contiguous'), tpSize: 2, ppSize: 1, blocks: 8 });
    const destination = workerFor({
      geometry: small('fully-contiguous'),
      tpSize: 2,
      ppSize: 1,
      blocks: 8,
      role: 'prefill',
    });
    const plan = referencePlan(source, destination, [
      [1, 4],
      [2, 5],
      [3, 6],
    ]);
    expect(
      plan.pairs.map((pair) => [pair.count, pair.sourceOffset[0], pair.destinationOffset[0], pair.length[0]]),
    ).toEqual([
      [1, 16n, 64n, 48n],
      [1, 16n, 64n, 48n],
    ]);
  });
});
