import {
  BlockOutOfRangeError,
  buildTransferTemplate,
  DuplicateDestinationBlockError,
  InvalidBlockListError,
  prepareTransfer,
} from '@kvreuse/descriptors';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { fuzz } from './fuzz-run.js';
import { decodeWorker, prefillWorker } from './samples.js';

const template = buildTransferTemplate(decodeWorker, prefillWorker);
const sourceBlocks = template.sourceLimit.blocks;
const destinationBlocks = template.destinationLimit.blocks;

/** What a request must end in, by the rules: the first bad index decides. */
function expectedOutcome(source: Uint32Array, destination: Uint32Array): string {
  if (source.length !== destination.length) return InvalidBlockListError.name;
  const seen = new Set<number>();
  for (let index = 0; index < source.length; index++) {
    if ((source[index] as number) >= sourceBlocks || (destination[index] as number) >= destinationBlocks)
      return `${BlockOutOfRangeError.name} at ${index}`;
    if (seen.has(destination[index] as number)) return `${DuplicateDestinationBlockError.name} at ${index}`;
    seen.add(destination[index] as number);
  }
  return 'prepared';
}

const block = (count: number): fc.Arbitrary<number> =>
  fc.oneof(
    { arbitrary: fc.nat({ max: count - 1 }), weight: 8 },
    fc.constantFrom(count, count + 1, 2 ** 31, 2 ** 32 - 1),
  );
const list = (count: number): fc.Arbitrary<Uint32Array> =>
  fc.array(block(count), { maxLength: 12 }).map((blocks) => Uint32Array.from(blocks));
const lists = fc.oneof(
  { arbitrary: fc.tuple(list(sourceBlocks), list(destinationBlocks)), weight: 1 },
  {
    arbitrary: fc.integer({ min: 0, max: 12 }).chain((length) =>
      fc.tuple(
        fc
          .array(block(sourceBlocks), { minLength: length, maxLength: length })
          .map((blocks) => Uint32Array.from(blocks)),
        fc
          .array(block(destinationBlocks), { minLength: length, maxLength: length })
          .map((blocks) => Uint32Array.from(blocks)),
      ),
    ),
    weight: 4,
  },
);

describe('transfer block lists', () => {
  it('a request is prepared exactly when its lists are equally long, in range and without a repeated destination', () => {
    fuzz('transfer block lists', lists, ([source, destination]) => {
      let outcome: string;
      try {
        const prepared = prepareTransfer({ template, sourceBlocks: source, destinationBlocks: destination });
        assert.equal(prepared.totalBytes, BigInt(source.length) * template.blockBytes);
        outcome = 'prepared';
      } catch (error) {
        if (error instanceof InvalidBlockListError) outcome = InvalidBlockListError.name;
        else if (error instanceof BlockOutOfRangeError) outcome = `${error.name} at ${error.index}`;
        else if (error instanceof DuplicateDestinationBlockError) outcome = `${error.name} at ${error.indices[1]}`;
        else throw error;
      }
      assert.equal(outcome, expectedOutcome(source, destination));
    });
  });
});
