import { MemoryDiscoveryStore, startRankPublication } from '@kvreuse/discovery';
import { describe, expect, it } from 'vitest';
import { testGeometry } from '../test/support/endpoint-workers.js';
import { testWorker } from '../test/workers.js';
import { readWorkerIncarnation } from './discovered-workers.js';

describe('discovered workers', () => {
  it('assembles an incarnation from its published parts only once complete', async () => {
    const store = new MemoryDiscoveryStore();
    const worker = testWorker(testGeometry, 2, 4, 'decode-7');
    const incarnation = { workerId: 'decode-7', incarnation: worker.ranks[0]!.incarnation };
    expect(await readWorkerIncarnation(store, incarnation)).toBeUndefined();
    const first = await startRankPublication(store, [worker.ranks[0]!], { leaseTtlMs: 600_000 });
    expect(await readWorkerIncarnation(store, incarnation)).toBeUndefined();
    const second = await startRankPublication(store, [worker.ranks[1]!], { leaseTtlMs: 600_000 });
    expect((await readWorkerIncarnation(store, incarnation))?.ranks.map((part) => part.parallel.tpRank)).toEqual([
      0, 1,
    ]);
    expect(await readWorkerIncarnation(store, { ...incarnation, incarnation: 'another' })).toBeUndefined();
    await first.withdraw();
    await second.withdraw();
    await store.close();
  });
});
