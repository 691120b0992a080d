import { describe, expect, it } from 'vitest';
import { MemoryDiscoveryStore } from './memory.js';
import type { DiscoveryStore } from './types.js';
import { assertNewestEpoch, claimIncarnationEpoch, commitFenced, readWorkerEpoch } from './incarnation-epoch.js';
import { incarnationEpochKey, workerEpochKey } from './rank-part-keys.js';

// The epochs themselves are proven on every backend by the discovery contract suite.
describe('incarnation epochs refuse arguments of the wrong shape, naming the argument, before touching the store', () => {
  it('readWorkerEpoch, claimIncarnationEpoch, assertNewestEpoch and commitFenced', async () => {
    const store = new MemoryDiscoveryStore();
    const option = (name: string) => expect.objectContaining({ code: 'INVALID_DISCOVERY_OPTION', option: name });
    const claimed = { workerId: 'w', incarnation: 'i', epoch: 1 };
    await expect(readWorkerEpoch(undefined as never, 'w')).rejects.toThrow(option('store'));
    await expect(readWorkerEpoch(store, 'w', { keyPrefix: 1 } as never)).rejects.toThrow(option('options.keyPrefix'));
    await expect(claimIncarnationEpoch(store, undefined as never)).rejects.toThrow(option('worker'));
    await expect(assertNewestEpoch(store, { ...claimed, epoch: Number.NaN }, 'test')).rejects.toThrow(
      'claimed.epoch = NaN is refused',
    );
    await expect(commitFenced(store, claimed, undefined as never, 'test')).rejects.toThrow(option('operations'));
    await expect(commitFenced(store, undefined as never, [], 'test')).rejects.toThrow(option('claimed'));
    expect((await store.list('')).entries).toEqual([]);
    await store.close();
  });
});

describe('claimIncarnationEpoch with two ranks of one incarnation claiming at once', () => {
  it("gives both the same epoch when the other rank's claim commits between this one's reads of the fence and the record (the chaos runs met it on a loaded machine)", async () => {
    const store = new MemoryDiscoveryStore();
    const worker = { workerId: 'decode-0', incarnation: 'inc-a' };
    const fenceKey = workerEpochKey(worker.workerId);
    const recordKey = incarnationEpochKey(worker);
    // This rank's first read of the fence sees it from before the other rank's claim, which commits
    // before that read returns; a read of the record made meanwhile sees the record after that commit.
    let otherClaim: Promise<unknown> | undefined;
    let fenceRead: Promise<unknown> | undefined;
    const interleaved = new Proxy(store, {
      get(target, property, receiver) {
        if (property !== 'get') return Reflect.get(target, property, receiver);
        return async (key: string) => {
          if (key === fenceKey && fenceRead === undefined) {
            fenceRead = (async () => {
              const before = await target.get(key);
              otherClaim = claimIncarnationEpoch(store, worker);
              await otherClaim;
              return before;
            })();
            return fenceRead;
          }
          if (key === recordKey && fenceRead !== undefined) await fenceRead;
          return target.get(key);
        };
      },
    }) as DiscoveryStore;
    const mine = await claimIncarnationEpoch(interleaved, worker);
    expect(mine).toEqual({ ...worker, epoch: (await readWorkerEpoch(store, worker.workerId))?.epoch });
    expect(await otherClaim).toEqual(mine);
    await store.close();
  });
});
