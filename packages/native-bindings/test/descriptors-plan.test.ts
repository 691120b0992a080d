import { buildTransferTemplate, type Geometry, materialize } from '@kvreuse/descriptors';
import { describe, expect, it } from 'vitest';
import { testedBackends } from './support/backends.js';
import { fillPattern } from './support/content.js';
import { allZero, liveCounters } from './support/pair.js';
import { closeRank, openRank, type RankSide, workerOf } from './support/ranks.js';

// Qwen3-0.6B, the reference geometry, in layer-separate banks of a few blocks each to keep the test small.
const geometry: Geometry = {
  numLayers: 28,
  kvPlanes: 2,
  blockTokens: 64,
  numKvHeads: 8,
  headDim: 128,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'HND',
};
const BLOCKS = 4;

describe.each(testedBackends)('materialized template descriptors posted as is on %s', (backend) => {
  it('pulls blocks from a TP 2 decode worker into a TP 1 prefill worker, byte for byte as planned', async () => {
    const decode = await Promise.all(
      [0, 1].map((tpRank) =>
        openRank({ workerId: 'decode-0', role: 'decode', geometry, tpRank, tpSize: 2, blocks: BLOCKS, backend }),
      ),
    );
    const prefill = await openRank({
      workerId: 'prefill-0',
      role: 'prefill',
      geometry,
      tpRank: 0,
      tpSize: 1,
      blocks: BLOCKS,
      backend,
    });
    decode.forEach((rank, tpRank) => fillPattern(rank.allocation.view(), 100 + tpRank));
    prefill.allocation.view().fill(0);

    const plan = materialize(buildTransferTemplate(workerOf(decode), workerOf([prefill])), {
      sourceBlocks: Uint32Array.of(0, 1, 2, 3),
      destinationBlocks: Uint32Array.of(3, 2, 1, 0),
    });
    expect(plan.pairs).toHaveLength(2);
    const operations = plan.pairs.map((pair) => {
      const source = decode[pair.sourceRank.tpRank];
      if (source === undefined) throw new Error('unknown source rank');
      return prefill.agent.post({
        direction: 'read',
        peer: prefill.agent.loadPeer(source.agent.metadata()),
        descriptors: pair,
        localRegions: prefill.regions,
        remoteRegions: source.regions.map((region) => region.id),
      });
    });
    const results = await Promise.all(operations.map((operation) => operation.done));
    expect(results.reduce((sum, result) => sum + result.bytesDone, 0)).toBe(Number(plan.totalBytes));

    // Every destination range holds exactly the source range the plan names.
    const base = (rank: RankSide, bank: number) =>
      Number((rank.part.banks[bank]?.address ?? 0n) - rank.allocation.address);
    const destination = prefill.allocation.view();
    let mismatches = 0;
    for (const pair of plan.pairs) {
      const source = decode[pair.sourceRank.tpRank];
      if (source === undefined) throw new Error('unknown source rank');
      const sourceView = source.allocation.view();
      for (let i = 0; i < pair.count; i++) {
        const from = base(source, pair.sourceBank[i] ?? 0) + Number(pair.sourceOffset[i]);
        const to = base(prefill, pair.destinationBank[i] ?? 0) + Number(pair.destinationOffset[i]);
        const bytes = Number(pair.length[i]);
        if (!destination.subarray(to, to + bytes).equals(sourceView.subarray(from, from + bytes))) mismatches++;
      }
    }
    expect(mismatches).toBe(0);
    // And together the ranges cover the prefill banks' every byte.
    expect(plan.totalBytes).toBe(BigInt(prefill.regions.reduce((sum, region) => sum + region.bytes, 0)));

    for (const operation of operations) operation.release();
    await closeRank(prefill);
    await Promise.all(decode.map(closeRank));
    expect(liveCounters()).toEqual(allZero);
  });
});
