import { describe, expect, it } from 'vitest';
import { deriveShard, InvalidShardError, referenceGeometries } from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const rank = (tpRank: number, tpSize: number, ppRank = 0, ppSize = 1) => ({ tpRank, tpSize, ppRank, ppSize });

describe('deriveShard', () => {
  it('splits KV heads and layers contiguously', () => {
    expect(deriveShard(qwen, rank(1, 2))).toEqual({
      kvHeads: { start: 4, count: 4 },
      layers: { start: 0, count: 28 },
      kvHeadReplicas: 1,
    });
    expect(deriveShard(qwen, rank(3, 8, 1, 4))).toEqual({
      kvHeads: { start: 3, count: 1 },
      layers: { start: 7, count: 7 },
      kvHeadReplicas: 1,
    });
  });

  it('replicates KV heads when tpSize exceeds numKvHeads', () => {
    expect([0, 1, 2, 3].map((tpRank) => deriveShard(qwen, rank(tpRank, 16)).kvHeads.start)).toEqual([0, 0, 1, 1]);
    expect(deriveShard(qwen, rank(15, 16)).kvHeadReplicas).toBe(2);
    const mla = deriveShard(referenceGeometries['deepseek-v3-mla'], rank(5, 8));
    expect(mla).toEqual({ kvHeads: { start: 0, count: 1 }, layers: { start: 0, count: 61 }, kvHeadReplicas: 8 });
  });

  it('rejects splits that do not divide, saying why', () => {
    expect(() => deriveShard(qwen, rank(0, 3))).toThrow(InvalidShardError);
    expect(() => deriveShard(qwen, null as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_SHARD', issue: expect.objectContaining({ field: 'parallel' }) }),
    );
    expect(() => deriveShard(undefined as never, rank(0, 1))).toThrow(InvalidShardError);
    expect(() => deriveShard(qwen, rank(0, 3))).toThrow(
      /parallel.tpSize = 3: must divide numKvHeads \(8\) or be a multiple of it/,
    );
    expect(() => deriveShard(qwen, rank(0, 12))).toThrow(/tpSize = 12/);
    expect(() => deriveShard(qwen, rank(0, 1, 0, 3))).toThrow(/parallel.ppSize = 3: must divide numLayers \(28\)/);
    expect(() => deriveShard(qwen, rank(0, 0))).toThrow(/must be a positive integer/);
    expect(() => deriveShard(qwen, rank(2, 2))).toThrow(/parallel.tpRank = 2: must be in \[0, 2\)/);
    expect(() => deriveShard(qwen, rank(0, 2, -1, 2))).toThrow(/parallel.ppRank = -1/);
  });

  it('refuses sizes that give a worker more than 65,536 ranks, naming the sizes and the cap', () => {
    const tooMany = expect.objectContaining({
      code: 'INVALID_SHARD',
      issue: expect.objectContaining({ field: 'parallel', value: { tpSize: 2 ** 40, ppSize: 1 } }),
    });
    expect(() => deriveShard(qwen, rank(0, 2 ** 40))).toThrow(tooMany);
    expect(() => deriveShard(qwen, rank(0, 2 ** 40))).toThrow(
      /parallel = .*: tpSize × ppSize = 1099511627776 ranks; a worker has at most 65536/,
    );
    expect(deriveShard(qwen, rank(0, 16_384, 0, 4)).kvHeadReplicas).toBe(2048);
    expect(() => deriveShard(qwen, rank(0, 32_768, 0, 4))).toThrow(/tpSize × ppSize = 131072 ranks/);
  });

  it('names the geometry field that cannot be split, not the parallel sizes', () => {
    const field = (name: string) => expect.objectContaining({ issue: expect.objectContaining({ field: name }) });
    expect(() => deriveShard({ ...qwen, numKvHeads: 0 }, rank(0, 2))).toThrow(field('geometry.numKvHeads'));
    expect(() => deriveShard({ ...qwen, numKvHeads: Number.NaN }, rank(0, 2))).toThrow(field('geometry.numKvHeads'));
    expect(() => deriveShard({ ...qwen, numLayers: undefined } as never, rank(0, 1, 0, 2))).toThrow(
      field('geometry.numLayers'),
    );
    expect(() => deriveShard({ ...qwen, numLayers: 0 }, rank(0, 1, 0, 2))).toThrow(InvalidShardError);
    expect(() => deriveShard({ ...qwen, numLayers: 0 }, rank(0, 1, 0, 2))).toThrow(/geometry.numLayers = 0/);
  });
});
