import type { RankPart } from '@kvreuse/descriptors';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { rankPartsOf } from '@kvreuse-internal/test-support';
import { localBackends, type StoreUnderTest } from '../test/helpers/stores.js';
import { RankPartOwnerError } from './errors.js';
import { rankPartKey, workerKeyPrefix } from './rank-part-keys.js';
import { encodeRankPartRecord } from './rank-part-record.js';

describe.each(localBackends)('a $name store', (backend) => {
  let opened: StoreUnderTest;
  beforeEach(() => {
    opened = backend.open();
  });
  afterEach(() => opened.dispose());

  const [partOfA] = rankPartsOf({ workerId: 'decode-a', incarnation: 'inc-1', tpSize: 1 }) as [RankPart];
  const [partOfB] = rankPartsOf({ workerId: 'decode-b', incarnation: 'inc-1', tpSize: 1 }) as [RankPart];
  const keyOfA = rankPartKey(partOfA, partOfA.parallel);
  const keyOfB = rankPartKey(partOfB, partOfB.parallel);

  it("refuses to put a worker's rank part under another worker's key, naming both", async () => {
    const write = opened.store.put(keyOfA, encodeRankPartRecord(partOfB, 1));
    await expect(write).rejects.toThrow(RankPartOwnerError);
    await expect(write).rejects.toMatchObject({
      code: 'RANK_PART_WRONG_WORKER',
      key: keyOfA,
      keyWorkerId: 'decode-a',
      partWorkerId: 'decode-b',
    });
    expect((await opened.store.list(workerKeyPrefix('decode-a'))).entries).toEqual([]);
  });

  it('refuses a commit that carries one such put, writing none of its other operations', async () => {
    const commit = opened.store.commit([
      { type: 'put', key: keyOfB, value: encodeRankPartRecord(partOfB, 1) },
      { type: 'put', key: `${keyOfA.slice(0, -'pp0-tp0'.length)}pp0-tp1`, value: encodeRankPartRecord(partOfB, 1) },
    ]);
    await expect(commit).rejects.toMatchObject({
      code: 'RANK_PART_WRONG_WORKER',
      keyWorkerId: 'decode-a',
      partWorkerId: 'decode-b',
    });
    expect((await opened.store.list('kvreuse/')).entries).toEqual([]);
  });

  it("stores a rank part under its own worker's key, under any key prefix, and leaves other values to the readers", async () => {
    await opened.store.put(keyOfA, encodeRankPartRecord(partOfA, 1));
    await opened.store.put(rankPartKey(partOfB, partOfB.parallel, 'tenant-7/'), encodeRankPartRecord(partOfB, 1));
    await expect(
      opened.store.put(rankPartKey(partOfB, partOfB.parallel, 'tenant-7/'), encodeRankPartRecord(partOfA, 1)),
    ).rejects.toThrow(RankPartOwnerError);
    await opened.store.put(keyOfB, 'not a rank part at all');
    expect((await opened.store.list('')).entries.map((entry) => entry.key)).toEqual([
      keyOfA,
      keyOfB,
      'tenant-7/workers/decode-b/incarnations/inc-1/pp0-tp0',
    ]);
  });
});
