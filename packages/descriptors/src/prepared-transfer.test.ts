import { describe, expect, it } from 'vitest';
import { workerFor } from '../test/support.js';
import {
  BlockOutOfRangeError,
  buildTransferTemplate,
  DuplicateDestinationBlockError,
  InvalidBlockListError,
  InvalidTransferTemplateError,
  prepareTransfer,
  referenceGeometries,
  type TransferTemplate,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const template = buildTransferTemplate(
  workerFor({ geometry: qwen, tpSize: 2, ppSize: 1, blocks: 64 }),
  workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 40, role: 'prefill' }),
);
const lists = (source: number[], destination: number[]) => ({
  template,
  sourceBlocks: Uint32Array.from(source),
  destinationBlocks: Uint32Array.from(destination),
});

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('prepareTransfer', () => {
  it('hands the block lists on as they are, with the bytes they move', () => {
    const request = lists([17, 18, 40], [0, 1, 2]);
    const prepared = prepareTransfer(request);
    expect(prepared.sourceBlocks).toBe(request.sourceBlocks);
    expect(prepared.destinationBlocks).toBe(request.destinationBlocks);
    expect(prepared.template).toBe(template);
    expect(prepared.totalBytes).toBe(3n * 7_340_032n);
    expect(prepareTransfer(lists([], [])).totalBytes).toBe(0n);
  });

  it('accepts one source block read into several destination blocks', () => {
    expect(prepareTransfer(lists([5, 5], [0, 39])).totalBytes).toBe(2n * 7_340_032n);
  });

  it('refuses a source block outside the source banks, naming side, rank, bank, block and index', () => {
    const error = thrown(() => prepareTransfer(lists([0, 63, 64], [0, 1, 2])));
    expect(error).toBeInstanceOf(BlockOutOfRangeError);
    expect(error).toMatchObject({
      code: 'BLOCK_OUT_OF_RANGE',
      side: 'source',
      rank: { tpRank: 0, ppRank: 0 },
      bank: 0,
      block: 64,
      blocks: 64,
      index: 2,
    });
  });

  it('refuses a destination block outside the destination banks', () => {
    expect(thrown(() => prepareTransfer(lists([0, 1], [39, 40])))).toMatchObject({
      side: 'destination',
      block: 40,
      blocks: 40,
      index: 1,
    });
    expect(() => prepareTransfer(lists([0], [4_294_967_295]))).toThrow(
      /destination block 4294967295 \(block list index 0\) is outside bank 0 of rank \(tp 0, pp 0\), which holds 40 blocks/,
    );
  });

  it('refuses a destination block written twice, naming both indices', () => {
    const error = thrown(() => prepareTransfer(lists([0, 1, 2, 3], [7, 33, 1, 33])));
    expect(error).toBeInstanceOf(DuplicateDestinationBlockError);
    expect(error).toMatchObject({ code: 'DUPLICATE_DESTINATION_BLOCK', block: 33, indices: [1, 3] });
  });

  it('reports the first offending index, and forgets a refused request entirely', () => {
    expect(thrown(() => prepareTransfer(lists([0, 9], [5, 5])))).toMatchObject({
      code: 'DUPLICATE_DESTINATION_BLOCK',
      indices: [0, 1],
    });
    expect(thrown(() => prepareTransfer(lists([99, 0], [5, 5])))).toMatchObject({
      code: 'BLOCK_OUT_OF_RANGE',
      index: 0,
    });
    // At one index, the source range comes before the duplicate.
    expect(thrown(() => prepareTransfer(lists([0, 99], [5, 5])))).toMatchObject({
      code: 'BLOCK_OUT_OF_RANGE',
      side: 'source',
      index: 1,
    });
    // The refused requests above marked block 5 (and more): a new request may write them.
    expect(prepareTransfer(lists([0, 1, 2], [5, 1, 33])).totalBytes).toBe(3n * 7_340_032n);
  });

  it('refuses lists that are not equally long Uint32Arrays', () => {
    expect(thrown(() => prepareTransfer(lists([1, 2], [1])))).toMatchObject({
      code: 'INVALID_BLOCK_LIST',
      index: 1,
      value: { sourceBlocks: 2, destinationBlocks: 1 },
    });
    const plain = { template, sourceBlocks: [1], destinationBlocks: [1] } as unknown as ReturnType<typeof lists>;
    expect(() => prepareTransfer(plain)).toThrow(InvalidBlockListError);
    expect(() => prepareTransfer(plain)).toThrow(/must be Uint32Arrays/);
  });

  it('refuses a template it cannot read', () => {
    const forged = { ...template, format: 2 } as unknown as TransferTemplate;
    expect(() => prepareTransfer({ ...lists([0], [0]), template: forged })).toThrow(InvalidTransferTemplateError);
    expect(() => prepareTransfer({ ...lists([0], [0]), template: forged })).toThrow(
      /expected a template from buildTransferTemplate \(format 1\), got format 2/,
    );
    expect(
      thrown(() => prepareTransfer({ ...lists([0], [0]), template: undefined as unknown as TransferTemplate })),
    ).toMatchObject({ code: 'INVALID_TRANSFER_TEMPLATE' });
  });
});
