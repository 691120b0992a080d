import type { RankPart } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import { MemoryDiscoveryStore, startRankPublication } from '@kvreuse/registry';
import { describe, expect, it } from 'vitest';
import { testGeometry } from '../test/support/endpoint-workers.js';
import { testWorker } from '../test/workers.js';
import { loadRankPeer, readWorkerIncarnation } from './discovered-workers.js';

const transport = loadTransport();

describe('discovered workers', () => {
  it('assembles an incarnation from its published parts only once complete, and loads a rank agent from its part', async () => {
    const store = new MemoryDiscoveryStore();
    const worker = testWorker(testGeometry, 2, 4, 'decode-7');
    const incarnation = { workerId: 'decode-7', incarnation: worker.ranks[0]!.incarnation };
    expect(await readWorkerIncarnation(store, incarnation)).toBeUndefined();
    const first = await startRankPublication(store, [worker.ranks[0]!], { leaseTtlMs: 600_000 });
    expect(await readWorkerIncarnation(store, incarnation)).toBeUndefined();
    const second = await startRankPublication(store, [worker.ranks[1]!], { leaseTtlMs: 600_000 });
    expect((await readWorkerIncarnation(store, incarnation))?.ranks.map((part) => part.parallel.tpRank)).toEqual([0, 1]);
    expect(await readWorkerIncarnation(store, { ...incarnation, incarnation: 'another' })).toBeUndefined();
    await first.withdraw();
    await second.withdraw();
    await store.close();

    const source = await transport.createAgent({ name: `discovered-source-${process.pid}`, backend: 'loopback' });
    const reader = await transport.createAgent({ name: `discovered-reader-${process.pid}`, backend: 'loopback' });
    const part: RankPart = { ...worker.ranks[0]!, transport: { agentName: source.name, generation: 1, metadata: Buffer.from(source.metadata()).toString('base64') } };
    expect(loadRankPeer(reader, part).name).toBe(source.name);
    await reader.close();
    await source.close();
  });
});
