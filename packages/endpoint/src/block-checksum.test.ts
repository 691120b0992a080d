import { buildTransferTemplate, type Geometry } from '@kvreuse/descriptors';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { copyBlocks, fillDeterministic, rankBankBytes, testWorker } from '../test/workers.js';
import { blockChecksum, blockChecksums } from './block-checksum.js';
import { EndpointOptionError } from './errors.js';

const geometryOf = (headOrder: 'HND' | 'NHD', numKvHeads: number): Geometry => ({
  numLayers: 2,
  kvPlanes: 2,
  blockTokens: 3,
  numKvHeads,
  headDim: 2,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder,
});

const scenario = fc
  .record({
    headOrder: fc.constantFrom('HND' as const, 'NHD' as const),
    numKvHeads: fc.constantFrom(2, 4),
    tp: fc.constantFrom([2, 1] as const, [1, 2] as const, [2, 2] as const, [1, 1] as const),
    blocks: fc.integer({ min: 2, max: 5 }),
  })
  .chain((s) =>
    fc.record({
      s: fc.constant(s),
      order: fc.shuffledSubarray(
        Array.from({ length: s.blocks }, (_, i) => i),
        { minLength: 1 },
      ),
      flip: fc.tuple(fc.nat(), fc.nat(), fc.nat()),
    }),
  );

describe('blockChecksums', () => {
  it('agree on both sides after a byte-exact copy, and one changed byte changes exactly its block (TP 2→1, 1→2, HND and NHD)', () => {
    fc.assert(
      fc.property(scenario, ({ s, order, flip }) => {
        const geometry = geometryOf(s.headOrder, s.numKvHeads);
        const source = testWorker(geometry, s.tp[0], s.blocks, 'src');
        const destination = testWorker(geometry, s.tp[1], s.blocks, 'dst');
        const template = buildTransferTemplate(source, destination);
        const sourceBytes = source.ranks.map((_, rank) => rankBankBytes(source, rank));
        sourceBytes.forEach((banks, rank) => banks.forEach((bytes, bank) => fillDeterministic(bytes, rank, bank)));
        const destinationBytes = destination.ranks.map((_, rank) => rankBankBytes(destination, rank));
        const sourceBlocks = Uint32Array.from(order);
        const destinationBlocks = Uint32Array.from(order, (_, i) => i);
        copyBlocks(template, { sourceBlocks, destinationBlocks }, sourceBytes, destinationBytes);

        const sums = template.pairs.map((_, p) => {
          const atSource = blockChecksums(
            template,
            p,
            'source',
            sourceBytes[template.pairSourceRank[p] as number]!,
            sourceBlocks,
          );
          const atDestination = blockChecksums(
            template,
            p,
            'destination',
            destinationBytes[template.pairDestinationRank[p] as number]!,
            destinationBlocks,
          );
          expect(atDestination).toEqual(atSource);
          return atDestination;
        });

        // Change one byte of one row of one block as the destination holds it.
        const p = flip[0] % template.pairs.length;
        const first = template.pairRouteStart[p]!;
        const r = first + (flip[1] % (template.pairRouteStart[p + 1]! - first));
        const i = flip[2] % destinationBlocks.length;
        const banks = destinationBytes[template.pairDestinationRank[p]!]!;
        const offset = Number(
          template.destinationBase[r]! + BigInt(destinationBlocks[i]!) * template.destinationBlockStride[r]!,
        );
        const bank = banks[template.destinationBank[r]!]!;
        bank[offset] = bank[offset]! ^ 0x5a;
        const after = blockChecksums(template, p, 'destination', banks, destinationBlocks);
        after.forEach((sum, j) => (j === i ? expect(sum).not.toBe(sums[p]![j]) : expect(sum).toBe(sums[p]![j])));
      }),
      { numRuns: 60 },
    );
  });

  it('names the bank that is missing or too short', () => {
    const geometry = geometryOf('NHD', 2);
    const source = testWorker(geometry, 2, 2, 'src');
    const template = buildTransferTemplate(source, testWorker(geometry, 1, 2, 'dst'));
    const banks = rankBankBytes(source, 0);
    expect(() => blockChecksum(template, 0, 'source', [], 0)).toThrow(EndpointOptionError);
    expect(() => blockChecksum(template, 0, 'source', [], 0)).toThrow(/banks\[0\].*source bank 0/);
    expect(() =>
      blockChecksum(
        template,
        0,
        'source',
        banks.map((b) => b.subarray(0, 4)),
        1,
      ),
    ).toThrow(/too short/);
    expect(() => blockChecksum(template, 7, 'source', banks, 0)).toThrow(/pair = 7/);
    expect(blockChecksum(template, 0, 'source', banks, 1)).toBe(blockChecksums(template, 0, 'source', banks, [1])[0]);
    // A negative index would read from the end of the bank, a fractional one between blocks.
    expect(() => blockChecksums(template, 0, 'source', banks, [0, -1])).toThrow(
      expect.objectContaining({ code: 'INVALID_ENDPOINT_OPTION', option: 'blocks[1]', value: -1 }),
    );
    expect(() => blockChecksum(template, 0, 'source', banks, 0.5)).toThrow(/blocks\[0\] = 0\.5/);
  });
});
