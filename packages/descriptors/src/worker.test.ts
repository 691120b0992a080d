import { describe, expect, it } from 'vitest';
import { rankPartsFor } from '../test/support.js';
import { assembleWorker, geometryDigest, type RankPart, rankPartOf, referenceGeometries } from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const parts = (): RankPart[] => rankPartsFor({ geometry: qwen, tpSize: 2, ppSize: 2, blocks: 4 });

describe('assembleWorker', () => {
  it('assembles a complete worker in any part order', () => {
    const all = parts();
    const result = assembleWorker([...all].reverse());
    expect(result.complete).toBe(true);
    if (!result.complete) return;
    const { worker } = result;
    expect({ ...worker, ranks: undefined }).toEqual({
      workerId: 'decode-worker',
      incarnation: 'decode-worker-incarnation',
      role: 'decode',
      geometry: qwen,
      geometryDigest: geometryDigest(qwen),
      tpSize: 2,
      ppSize: 2,
      dpRank: 0,
      ranks: undefined,
    });
    expect(rankPartOf(worker, { tpRank: 1, ppRank: 0 })).toBe(all[1]);
    expect(rankPartOf(worker, { tpRank: 0, ppRank: 1 })).toBe(all[2]);
    expect(rankPartOf(worker, { tpRank: 2, ppRank: 0 })).toBeUndefined();
  });

  it('names missing and duplicated ranks', () => {
    const [a, b, , d] = parts();
    expect(assembleWorker([a!, b!, d!, b!])).toEqual({
      complete: false,
      missing: [{ tpRank: 0, ppRank: 1 }],
      duplicates: [{ rank: { tpRank: 1, ppRank: 0 }, count: 2 }],
      conflicts: [],
    });
  });

  it('names each conflicting field against what most parts say', () => {
    const all = parts();
    all[3] = { ...all[3]!, incarnation: 'restarted', geometry: { ...qwen, dtype: 'fp16' } };
    all[1] = { ...all[1]!, parallel: { ...all[1]!.parallel, dpRank: 1 } };
    const result = assembleWorker(all);
    expect(result.complete).toBe(false);
    if (result.complete) return;
    expect(result.conflicts).toEqual([
      { rank: { tpRank: 1, ppRank: 1 }, field: 'incarnation', expected: 'decode-worker-incarnation', actual: 'restarted' },
      { rank: { tpRank: 1, ppRank: 0 }, field: 'parallel.dpRank', expected: 0, actual: 1 },
      { rank: { tpRank: 1, ppRank: 1 }, field: 'geometry.dtype', expected: 'bf16', actual: 'fp16' },
    ]);
    expect(result.missing).toEqual([]);
  });

  it('reports parts that disagree on the worker size, and the ranks that size lacks', () => {
    const all = parts();
    const stray = rankPartsFor({ geometry: qwen, tpSize: 4, ppSize: 2, blocks: 4 })[3]!;
    const result = assembleWorker([all[0]!, all[1]!, all[2]!, stray]);
    expect(result).toMatchObject({
      complete: false,
      missing: [{ tpRank: 1, ppRank: 1 }],
      conflicts: [{ rank: { tpRank: 3, ppRank: 0 }, field: 'parallel.tpSize', expected: 2, actual: 4 }],
    });
  });

  it('calls an empty list incomplete', () => {
    expect(assembleWorker([])).toMatchObject({ complete: false, conflicts: [{ field: 'parts', actual: 0 }] });
  });
});
