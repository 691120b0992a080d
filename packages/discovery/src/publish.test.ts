// Publication races between two incarnations of one worker, each ordering forced: whatever the
// timing, the newer incarnation (larger epoch) is never displaced and its parts are never deleted.
import type { RankPart } from '@kvreuse/descriptors';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { rankPartsOf } from '@kvreuse-internal/test-support';
import { localBackends, type StoreUnderTest } from '../test/helpers/stores.js';
import { SupersededError } from './errors.js';
import { claimIncarnationEpoch, type IncarnationEpoch } from './incarnation-epoch.js';
import { MemoryDiscoveryStore } from './memory.js';
import { startRankPublication } from './publication.js';
import { publishRankParts, withdrawRankParts } from './publish.js';
import { workerPartsPrefix } from './rank-part-keys.js';
import type { DiscoverySnapshot, DiscoveryStore, LeaseId } from './types.js';

const workerId = 'decode-race';
const older = rankPartsOf({ workerId, incarnation: 'inc-1', tpSize: 2 });
const newer = rankPartsOf({ workerId, incarnation: 'inc-2', tpSize: 2, generation: 2 });

describe.each(localBackends)('fenced rank-part publication on $name discovery', (backend) => {
  let under: StoreUnderTest;
  let store: DiscoveryStore;
  let lease: LeaseId;
  let first: IncarnationEpoch;

  beforeEach(async () => {
    under = backend.open();
    store = under.store;
    lease = (await store.grantLease(60_000)).id;
    first = await claimIncarnationEpoch(store, older[0]!);
  });

  afterEach(async () => {
    await under.dispose();
  });

  const publishedIncarnations = async (): Promise<string[]> =>
    (await store.list(workerPartsPrefix(workerId))).entries.map((entry) =>
      entry.key.slice(workerPartsPrefix(workerId).length),
    );

  /** Runs `between` after the next listing returns and before the publication that listed goes on to commit. */
  function betweenListAndCommit(between: () => Promise<void>): void {
    const list = store.list.bind(store);
    vi.spyOn(store, 'list').mockImplementationOnce(async (prefix): Promise<DiscoverySnapshot> => {
      const snapshot = await list(prefix);
      await between();
      return snapshot;
    });
  }

  it('an older incarnation whose commit comes after a newer claim and publication writes nothing and is told SUPERSEDED', async () => {
    let second: IncarnationEpoch | undefined;
    betweenListAndCommit(async () => {
      second = await claimIncarnationEpoch(store, newer[0]!);
      await publishRankParts(store, newer, { lease, epoch: second.epoch });
    });
    const refused = await publishRankParts(store, older, { lease, epoch: first.epoch }).catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(SupersededError);
    expect(refused).toMatchObject({
      incarnation: 'inc-1',
      epoch: first.epoch,
      newerEpoch: second!.epoch,
      newerIncarnation: 'inc-2',
    });
    expect(await publishedIncarnations()).toEqual(['inc-2/pp0-tp0', 'inc-2/pp0-tp1']);
  });

  it('an older incarnation that publishes between a newer one’s list and commit is refused, and the newer commit lands', async () => {
    await publishRankParts(store, older, { lease, epoch: first.epoch });
    const second = await claimIncarnationEpoch(store, newer[0]!);
    let refused: unknown;
    betweenListAndCommit(async () => {
      refused = await publishRankParts(store, older, { lease, epoch: first.epoch }).catch((error: unknown) => error);
    });
    await publishRankParts(store, newer, { lease, epoch: second.epoch });
    expect(refused).toMatchObject({ code: 'SUPERSEDED', incarnation: 'inc-1', newerIncarnation: 'inc-2' });
    expect(await publishedIncarnations()).toEqual(['inc-2/pp0-tp0', 'inc-2/pp0-tp1']);
  });

  it('a newer claim between an older incarnation’s list and commit, with nothing published yet, also refuses the older commit', async () => {
    betweenListAndCommit(async () => {
      await claimIncarnationEpoch(store, newer[0]!);
    });
    await expect(publishRankParts(store, older, { lease, epoch: first.epoch })).rejects.toBeInstanceOf(SupersededError);
    expect(await publishedIncarnations()).toEqual([]);
  });

  it('the newer incarnation replaces the older one’s parts, and a stray key under the worker, in its one commit', async () => {
    await publishRankParts(store, older, { lease, epoch: first.epoch });
    await store.put(`${workerPartsPrefix(workerId)}stray`, 'not a part');
    const second = await claimIncarnationEpoch(store, newer[0]!);
    await publishRankParts(store, newer.slice(0, 1), { lease, epoch: second.epoch });
    expect(await publishedIncarnations()).toEqual(['inc-2/pp0-tp0']);
    await publishRankParts(store, newer.slice(1), { lease, epoch: second.epoch });
    expect(await publishedIncarnations()).toEqual(['inc-2/pp0-tp0', 'inc-2/pp0-tp1']);
  });

  it('refuses an epoch that claimIncarnationEpoch cannot have handed out', async () => {
    for (const epoch of [0, -1, 1.5, Number.NaN, '3' as unknown as number]) {
      await expect(publishRankParts(store, older, { lease, epoch })).rejects.toMatchObject({
        code: 'RANK_PART_PUBLICATION_REFUSED',
        field: 'epoch',
      });
    }
    const parts: readonly RankPart[] = [];
    await expect(publishRankParts(store, parts, { lease, epoch: first.epoch })).rejects.toThrow(
      /at least one rank part/,
    );
  });
});

const shapeParts = rankPartsOf({ workerId: 'decode-shape', incarnation: 'inc-a', tpSize: 1 });
const option = (name: string) => expect.objectContaining({ code: 'INVALID_DISCOVERY_OPTION', option: name });

describe('publishing refuses arguments of the wrong shape, naming the argument, before touching the store', () => {
  it('publishRankParts, withdrawRankParts and startRankPublication', async () => {
    const store = new MemoryDiscoveryStore();
    await expect(publishRankParts({} as never, shapeParts, { lease: 'l', epoch: 1 })).rejects.toThrow(option('store'));
    await expect(publishRankParts(store, undefined as never, { lease: 'l', epoch: 1 })).rejects.toThrow(
      option('parts'),
    );
    await expect(publishRankParts(store, shapeParts, undefined as never)).rejects.toThrow(option('options'));
    await expect(publishRankParts(store, shapeParts, {} as never)).rejects.toThrow(option('options.lease'));
    await expect(publishRankParts(store, shapeParts, { lease: 'l', epoch: 1, keyPrefix: 7 } as never)).rejects.toThrow(
      option('options.keyPrefix'),
    );
    await expect(withdrawRankParts(store, undefined as never)).rejects.toThrow(option('worker'));
    await expect(startRankPublication(store, shapeParts, undefined as never)).rejects.toThrow(option('options'));
    await expect(
      startRankPublication(store, shapeParts, { leaseTtlMs: 1_000, onTrouble: 'log' } as never),
    ).rejects.toThrow(option('options.onTrouble'));
    expect((await store.list('')).entries).toEqual([]);
    await store.close();
  });
});
