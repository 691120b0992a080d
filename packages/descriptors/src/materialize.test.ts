import { describe, expect, it } from 'vitest';
import { firstDifference, simulation } from '../test/simulation.js';
import { workerFor } from '../test/support.js';
import { referencePlan } from '../test/reference-planner.js';
import {
  buildTransferTemplate,
  DuplicateDestinationBlockError,
  type Geometry,
  materialize,
  referenceGeometries,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const prefix = Array.from({ length: 42 }, (_, i) => [i, i] as [number, number]);
const asLists = (pairs: readonly (readonly [number, number])[]) => ({
  sourceBlocks: Uint32Array.from(pairs, ([source]) => source),
  destinationBlocks: Uint32Array.from(pairs, ([, destination]) => destination),
});

describe('materialize', () => {
  it("gives referencePlan's descriptors for the 42-block Qwen3-0.6B pull from decode TP=2 to prefill TP=1", () => {
    const decode = workerFor({ geometry: qwen, tpSize: 2, ppSize: 1, blocks: 64 });
    const prefill = workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 64, role: 'prefill' });
    const plan = materialize(buildTransferTemplate(decode, prefill), asLists(prefix));
    expect(plan).toEqual(referencePlan(decode, prefill, prefix));
    expect([plan.totalBytes, plan.descriptorCount]).toEqual([308_281_344n, 4704]);
  });

  it('coalesces whole blocks of interleaved K/V banks (one layer per rank) into one descriptor', () => {
    const geometry: Geometry = { ...qwen, numLayers: 2 };
    const source = workerFor({ geometry, tpSize: 1, ppSize: 2, blocks: 8, planeStride: 131_072 });
    const destination = workerFor({ geometry, tpSize: 1, ppSize: 2, blocks: 8, planeStride: 131_072, role: 'prefill' });
    const blocks: [number, number][] = [
      [2, 5],
      [3, 6],
      [4, 7],
    ];
    const plan = materialize(buildTransferTemplate(source, destination), asLists(blocks));
    expect(
      plan.pairs.map((pair) => [pair.count, pair.sourceOffset[0], pair.destinationOffset[0], pair.length[0]]),
    ).toEqual([
      [1, 2n * 262_144n, 5n * 262_144n, 3n * 262_144n],
      [1, 2n * 262_144n, 5n * 262_144n, 3n * 262_144n],
    ]);
    expect(plan).toEqual(referencePlan(source, destination, blocks));
    const { expected, run } = simulation(source, destination, blocks);
    expect(firstDifference(run(plan), expected)).toBeUndefined();
  });

  it('refuses a hand-made template whose routes reach past byte 2^53 − 1, or lack an entry, naming the route', () => {
    const worker = workerFor({ geometry: { ...qwen, numLayers: 1 }, tpSize: 1, ppSize: 1, blocks: 4 });
    const template = buildTransferTemplate(worker, worker);
    const far = { ...template, sourceBase: BigUint64Array.of(2n ** 60n, 0n) };
    expect(() => materialize(far, asLists([[0, 1]]))).toThrow(
      expect.objectContaining({
        code: 'INVALID_TRANSFER_TEMPLATE',
        value: far,
        message:
          'invalid transfer template: route 0 must reach at most byte 2^53 − 1 of its source bank, as materialize ' +
          'counts offsets in numbers; it has sourceBase 1152921504606846976n, sourceLimit.blocks 4, ' +
          'sourceBlockStride 131072n, rows 1, sourceRowStride 131072n, rowBytes 131072n, ' +
          'so it reaches byte 1152921504607371264',
      }),
    );
    const short = { ...template, destinationRowStride: BigUint64Array.of(131_072n) };
    expect(() => materialize(short, asLists([[0, 1]]))).toThrow(
      /^invalid transfer template: route 1 must reach at most byte 2\^53 − 1 of its destination bank, .*destinationRowStride undefined, rowBytes 131072n$/,
    );
  });

  it('checks the blocks like prepareTransfer, and its options', () => {
    const worker = workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 4 });
    expect(() =>
      materialize(
        buildTransferTemplate(worker, worker),
        asLists([
          [0, 1],
          [2, 1],
        ]),
      ),
    ).toThrow(DuplicateDestinationBlockError);
    // Options it cannot read are refused, not read as coalescing (a string 'false' is truthy).
    const template = buildTransferTemplate(worker, worker);
    for (const options of [null, { coalesce: 'false' }]) {
      expect(() => materialize(template, asLists([[0, 1]]), options as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_TRANSFER_TEMPLATE', value: options }),
      );
    }
    // Block lists that are no object are refused as given, not read as two missing lists.
    for (const blocks of [null, 'ab']) {
      expect(() => materialize(template, blocks as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_BLOCK_LIST', index: undefined, value: blocks }),
      );
    }
    expect(() => materialize(template, null as never)).toThrow(
      "invalid block list: null: materialize's blocks must be { sourceBlocks, destinationBlocks }",
    );
    expect(materialize(buildTransferTemplate(worker, worker), asLists([]))).toEqual({
      pairs: [],
      totalBytes: 0n,
      descriptorCount: 0,
    });
  });
});
