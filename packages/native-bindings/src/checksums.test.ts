import { buildTransferTemplate, type Geometry } from '@kvreuse/descriptors';
import { describe, expect, it } from 'vitest';
import { fillPattern } from '../test/support/content.js';
import { allZero, liveCounters } from '../test/support/pair.js';
import { closeRank, openRank, type RankSide, workerOf } from '../test/support/ranks.js';
import { ForeignHandleError, InvalidArgumentError } from './errors.js';

const geometry: Geometry = {
  numLayers: 2,
  kvPlanes: 2,
  blockTokens: 4,
  numKvHeads: 4,
  headDim: 8,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'HND',
};
const sourceBlocks = Uint32Array.from([3, 0, 2]);
const destinationBlocks = Uint32Array.from([1, 2, 0]);

/** Decode TP 2 (the pattern) and prefill TP 1 (zeros), on loopback agents, and their template. */
async function openWorkers() {
  const rank = (workerId: string, role: 'decode' | 'prefill', tpRank: number, tpSize: number) =>
    openRank({ workerId, role, geometry, tpRank, tpSize, blocks: 4, backend: 'loopback' });
  const source = [await rank('decode-0', 'decode', 0, 2), await rank('decode-0', 'decode', 1, 2)];
  const destination = [await rank('prefill-0', 'prefill', 0, 1)];
  source.forEach((side, tpRank) => fillPattern(side.allocation.view(), 70 + tpRank));
  (destination[0] as RankSide).allocation.view().fill(0);
  return { source, destination, template: buildTransferTemplate(workerOf(source), workerOf(destination)) };
}

describe('agent.blockChecksums', () => {
  it('agrees between the two sides of a pull block by block, and a flipped byte changes its block only', async () => {
    const { source, destination, template } = await openWorkers();
    const prefill = destination[0] as RankSide;
    for (const [p, pair] of template.pairs.entries()) {
      const from = source[pair.sourceRank.tpRank] as RankSide;
      const handle = prefill.agent.registerTemplate({
        peer: prefill.agent.loadPeer(from.agent.metadata()),
        template,
        pair: p,
        direction: 'read',
        localRegions: prefill.regions,
        remoteRegions: from.regions.map((region) => region.id),
      });
      const operation = prefill.agent.postBlocks({ template: handle, sourceBlocks, destinationBlocks });
      await operation.done;
      operation.release();
      handle.release();
      const sent = from.agent.blockChecksums({
        template,
        pair: p,
        side: 'source',
        regions: from.regions,
        blocks: sourceBlocks,
      });
      const received = prefill.agent.blockChecksums({
        template,
        pair: p,
        side: 'destination',
        regions: prefill.regions,
        blocks: destinationBlocks,
      });
      expect([...received]).toEqual([...sent]);
      expect(new Set(sent).size).toBe(3);
    }
    // Block 2 of the prefill rank holds source block 0's first row of pair 0's first route: flip a byte there.
    const route = template.pairRouteStart[0] as number;
    const bank = template.destinationBank[route] as number;
    const region = prefill.regions[bank];
    const at =
      Number((region?.address ?? 0n) - prefill.allocation.address) +
      Number((template.destinationBase[route] as bigint) + 2n * (template.destinationBlockStride[route] as bigint));
    const before = prefill.agent.blockChecksums({
      template,
      pair: 0,
      side: 'destination',
      regions: prefill.regions,
      blocks: destinationBlocks,
    });
    const view = prefill.allocation.view();
    view[at] = (view[at] as number) ^ 1;
    const after = prefill.agent.blockChecksums({
      template,
      pair: 0,
      side: 'destination',
      regions: prefill.regions,
      blocks: destinationBlocks,
    });
    expect([after[0] === before[0], after[1] === before[1], after[2] === before[2]]).toEqual([true, false, true]);
    for (const side of [...source, ...destination]) await closeRank(side);
  });

  it('refuses a missing bank, a region of another agent, a block that is not an index and a route past its region', async () => {
    const { source, destination, template } = await openWorkers();
    const prefill = destination[0] as RankSide;
    const request = { template, pair: 0, side: 'destination' as const, blocks: [0] };
    expect(() => prefill.agent.blockChecksums({ ...request, regions: [] })).toThrow(InvalidArgumentError);
    const foreign = (source[0] as RankSide).regions;
    expect(() => prefill.agent.blockChecksums({ ...request, regions: foreign })).toThrow(ForeignHandleError);
    for (const block of [-1, 1.5, 2 ** 32])
      expect(() => prefill.agent.blockChecksums({ ...request, regions: prefill.regions, blocks: [block] })).toThrow(
        expect.objectContaining({ name: 'InvalidArgumentError', message: expect.stringContaining('blocks[0]') }),
      );
    // What is not a template, a region list or a region: a typed refusal naming it, not a TypeError.
    const refused = (argument: string) => expect.objectContaining({ code: 'INVALID_ARGUMENT', argument });
    for (const wrong of [undefined, {}])
      expect(() =>
        prefill.agent.blockChecksums({ ...request, template: wrong as never, regions: prefill.regions }),
      ).toThrow(refused('template'));
    expect(() => prefill.agent.blockChecksums({ ...request, regions: undefined as never })).toThrow(refused('regions'));
    const ids = prefill.regions.map((region) => region.id);
    expect(() => prefill.agent.blockChecksums({ ...request, regions: ids as never })).toThrow(refused('regions[0]'));
    // A base past 2^32 reaches the library whole: its refusal names where the route's block ends.
    const far = { ...template, destinationBase: template.destinationBase.map((base) => base + 2n ** 32n + 16n) };
    const route = template.pairRouteStart[0] as number;
    const end =
      (template.destinationBase[route] as bigint) +
      2n ** 32n +
      16n +
      BigInt((template.rows[route] as number) - 1) * (template.destinationRowStride[route] as bigint) +
      (template.rowBytes[route] as bigint);
    expect(() => prefill.agent.blockChecksums({ ...request, template: far, regions: prefill.regions })).toThrow(
      expect.objectContaining({
        code: 'INVALID_PARAM',
        message: expect.stringContaining(`route 0: block 0 ends at byte ${end},`),
      }),
    );
    for (const side of [...source, ...destination]) await closeRank(side);
    expect(liveCounters()).toEqual(allZero);
  });
});
