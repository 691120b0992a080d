import {
  assembleWorker,
  type Geometry,
  layoutRankBanks,
  parseRankPart,
  planTransfer,
  type RankPart,
  type Worker,
} from '@kvreuse/descriptors';
import { describe, expect, it } from 'vitest';
import type { Agent, Allocation, Region } from '@kvreuse/native-bindings';
import { agentName, testedBackends, transport } from './support/backends.js';
import { fillPattern } from './support/content.js';
import { allZero, liveCounters } from './support/pair.js';

// Qwen3-0.6B (DESIGN.md), layer-separate banks of a few blocks each to keep the test small.
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

interface RankSide {
  readonly agent: Agent;
  readonly allocation: Allocation;
  /** One region per bank, in the rank part's bank order. */
  readonly regions: Region[];
  readonly part: RankPart;
}

/** An agent for one rank: its banks laid out in one allocation, each bank registered as its own region. */
async function openRank(workerId: string, role: 'decode' | 'prefill', tpRank: number, tpSize: number, backend: 'loopback' | 'ucx'): Promise<RankSide> {
  const parallel = { tpRank, tpSize, ppRank: 0, ppSize: 1 };
  const agent = await transport.createAgent({ name: agentName(`${workerId}-tp${tpRank}`), backend });
  const extent = layoutRankBanks(geometry, parallel, { blocks: BLOCKS, address: 0n }).at(-1);
  if (extent === undefined) throw new Error('no banks');
  const allocation = agent.allocate(Number(extent.address + extent.bytes));
  const banks = layoutRankBanks(geometry, parallel, { blocks: BLOCKS, address: allocation.address });
  const regions = banks.map((bank) => agent.register({ address: bank.address, bytes: bank.bytes }));
  const part = parseRankPart({
    version: 1,
    workerId,
    incarnation: '0123456789abcdef',
    role,
    geometry,
    parallel: { ...parallel, dpRank: 0 },
    banks: banks.map((bank) => ({
      memKind: bank.memKind,
      deviceId: bank.deviceId,
      address: String(bank.address),
      bytes: String(bank.bytes),
      blocks: bank.blocks,
      blockStride: String(bank.blockStride),
    })),
    transport: { agentName: agent.name, generation: 1, metadata: agent.metadata().toString('base64') },
  });
  return { agent, allocation, regions, part };
}

function worker(ranks: readonly RankSide[]): Worker {
  const assembled = assembleWorker(ranks.map((rank) => rank.part));
  if (!assembled.complete) throw new Error('worker incomplete');
  return assembled.worker;
}

async function closeRank(rank: RankSide): Promise<void> {
  for (const region of rank.regions) region.deregister();
  rank.allocation.free();
  await rank.agent.close();
}

describe.each(testedBackends)('planTransfer output posted as is on %s', (backend) => {
  it('pulls blocks from a TP 2 decode worker into a TP 1 prefill worker, byte for byte as planned', async () => {
    const decode = await Promise.all([0, 1].map((tpRank) => openRank('decode-0', 'decode', tpRank, 2, backend)));
    const prefill = await openRank('prefill-0', 'prefill', 0, 1, backend);
    decode.forEach((rank, tpRank) => fillPattern(rank.allocation.view(), 100 + tpRank));
    prefill.allocation.view().fill(0);

    const plan = planTransfer(worker(decode), worker([prefill]), [
      [0, 3],
      [1, 2],
      [2, 1],
      [3, 0],
    ]);
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
    const base = (rank: RankSide, bank: number) => Number((rank.part.banks[bank]?.address ?? 0n) - rank.allocation.address);
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
