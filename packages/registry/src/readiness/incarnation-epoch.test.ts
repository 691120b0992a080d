import { describe, expect, it } from 'vitest';
import { MemoryDiscoveryStore } from '../discovery/memory.js';
import { assertNewestEpoch, claimIncarnationEpoch, commitFenced, readWorkerEpoch } from './incarnation-epoch.js';

// The epochs themselves are proven on every backend by the discovery contract suite.
describe('incarnation epochs refuse arguments of the wrong shape, naming the argument, before touching the store', () => {
  it('readWorkerEpoch, claimIncarnationEpoch, assertNewestEpoch and commitFenced', async () => {
    const store = new MemoryDiscoveryStore();
    const option = (name: string) => expect.objectContaining({ code: 'INVALID_REGISTRY_OPTION', option: name });
    const claimed = { workerId: 'w', incarnation: 'i', epoch: 1 };
    await expect(readWorkerEpoch(undefined as never, 'w')).rejects.toThrow(option('store'));
    await expect(readWorkerEpoch(store, 'w', { keyPrefix: 1 } as never)).rejects.toThrow(option('options.keyPrefix'));
    await expect(claimIncarnationEpoch(store, undefined as never)).rejects.toThrow(option('worker'));
    await expect(assertNewestEpoch(store, { ...claimed, epoch: Number.NaN }, 'test')).rejects.toThrow('claimed.epoch = NaN is refused');
    await expect(commitFenced(store, claimed, undefined as never, 'test')).rejects.toThrow(option('operations'));
    await expect(commitFenced(store, undefined as never, [], 'test')).rejects.toThrow(option('claimed'));
    expect((await store.list('')).entries).toEqual([]);
    await store.close();
  });
});
