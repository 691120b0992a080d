import { describe, expect, it } from 'vitest';
import { workerFor } from '../test/support.js';
import {
  buildTransferTemplate,
  checkCompatibility,
  type Geometry,
  InvalidRankPartError,
  type RankPart,
  referenceGeometries,
  type Worker,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const worker = (geometry: Geometry, tpSize: number, ppSize = 1) => workerFor({ geometry, tpSize, ppSize, blocks: 2 });

describe('checkCompatibility', () => {
  it('maps decode TP=2 onto prefill TP=1: both source ranks feed the one destination rank', () => {
    expect(checkCompatibility(worker(qwen, 2), worker(qwen, 1))).toEqual({
      ok: true,
      mapping: {
        routes: [
          {
            sourceRank: { tpRank: 0, ppRank: 0 },
            destinationRank: { tpRank: 0, ppRank: 0 },
            kvHeads: { start: 0, count: 4 },
            layers: { start: 0, count: 28 },
          },
          {
            sourceRank: { tpRank: 1, ppRank: 0 },
            destinationRank: { tpRank: 0, ppRank: 0 },
            kvHeads: { start: 4, count: 4 },
            layers: { start: 0, count: 28 },
          },
        ],
      },
    });
  });

  it('splits a source rank across destination ranks (TP 1 → TP 4) and maps PP layer ranges', () => {
    const result = checkCompatibility(worker(qwen, 1, 2), worker(qwen, 4, 4));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const summary = result.mapping.routes.map(
      (r) =>
        `${r.sourceRank.tpRank}/${r.sourceRank.ppRank}→${r.destinationRank.tpRank}/${r.destinationRank.ppRank} h${r.kvHeads.start}+${r.kvHeads.count} l${r.layers.start}+${r.layers.count}`,
    );
    expect(summary).toHaveLength(16);
    expect(summary.slice(0, 5)).toEqual([
      '0/0→0/0 h0+2 l0+7',
      '0/0→1/0 h2+2 l0+7',
      '0/0→2/0 h4+2 l0+7',
      '0/0→3/0 h6+2 l0+7',
      '0/0→0/1 h0+2 l7+7',
    ]);
    expect(summary).toContain('0/1→3/3 h6+2 l21+7');
  });

  it('cuts layer ranges where PP boundaries differ', () => {
    const geometry: Geometry = { ...qwen, numLayers: 6 };
    const result = checkCompatibility(worker(geometry, 1, 2), worker(geometry, 1, 3));
    expect(
      result.ok && result.mapping.routes.map((r) => [r.sourceRank.ppRank, r.destinationRank.ppRank, r.layers]),
    ).toEqual([
      [0, 0, { start: 0, count: 2 }],
      [0, 1, { start: 2, count: 1 }],
      [1, 1, { start: 3, count: 1 }],
      [1, 2, { start: 4, count: 2 }],
    ]);
  });

  it('spreads destination ranks over replicated source heads', () => {
    const result = checkCompatibility(worker(qwen, 16), worker(qwen, 16));
    expect(result.ok && result.mapping.routes.map((r) => [r.sourceRank.tpRank, r.destinationRank.tpRank])).toEqual(
      Array.from({ length: 16 }, (_, i) => [i, i]),
    );
    const mla = referenceGeometries['deepseek-v3-mla'];
    const fromReplicas = checkCompatibility(worker(mla, 4), worker(mla, 2));
    expect(
      fromReplicas.ok && fromReplicas.mapping.routes.map((r) => [r.sourceRank.tpRank, r.destinationRank.tpRank]),
    ).toEqual([
      [0, 0],
      [1, 1],
    ]);
  });

  it('lists every mismatch with a stable code and both values, and never throws', () => {
    const other: Geometry = {
      numLayers: 32,
      kvPlanes: 1,
      blockTokens: 16,
      numKvHeads: 4,
      headDim: 64,
      dtype: 'fp8_e4m3',
      bankLayout: 'fully-contiguous',
      headOrder: 'NHD',
    };
    const result = checkCompatibility(worker(qwen, 2), worker(other, 1));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.reasons.map((r) => [r.code, r.field, r.source, r.destination])).toEqual([
      ['NUM_LAYERS_MISMATCH', 'geometry.numLayers', 28, 32],
      ['KV_PLANES_MISMATCH', 'geometry.kvPlanes', 2, 1],
      ['BLOCK_TOKENS_MISMATCH', 'geometry.blockTokens', 64, 16],
      ['NUM_KV_HEADS_MISMATCH', 'geometry.numKvHeads', 8, 4],
      ['HEAD_DIM_MISMATCH', 'geometry.headDim', 128, 64],
      ['DTYPE_MISMATCH', 'geometry.dtype', 'bf16', 'fp8_e4m3'],
      ['HEAD_ORDER_MISMATCH', 'geometry.headOrder', 'HND', 'NHD'],
    ]);
  });

  it('refuses TP sizes where neither divides the other, and accepts differing bank layouts', () => {
    const llama = referenceGeometries['llama-3.1-70b'];
    const wide: Geometry = { ...llama, numKvHeads: 12 };
    expect(checkCompatibility(worker(wide, 4), worker(wide, 6))).toMatchObject({
      ok: false,
      reasons: [{ code: 'TP_SIZES_NOT_DIVISIBLE', field: 'tpSize', source: 4, destination: 6 }],
    });
    expect(checkCompatibility(worker(llama, 8), worker({ ...llama, bankLayout: 'fully-contiguous' }, 4)).ok).toBe(true);
  });
});

describe('checkCompatibility and buildTransferTemplate trust a worker only as far as they check it', () => {
  const source = worker(qwen, 2);
  const destination = worker(qwen, 1);
  /** Both functions refuse `bad` (in the `side` position) with InvalidRankPartError naming `field`. */
  const expectRefused = (side: 'source' | 'destination', bad: Worker, field: string, rule: RegExp) => {
    const [from, to] = side === 'source' ? [bad, destination] : [source, bad];
    const refusal = expect.objectContaining({
      code: 'INVALID_RANK_PART',
      issues: [expect.objectContaining({ field, rule: expect.stringMatching(rule) })],
    });
    expect(() => checkCompatibility(from, to)).toThrow(InvalidRankPartError);
    expect(() => checkCompatibility(from, to)).toThrow(refusal);
    expect(() => buildTransferTemplate(from, to)).toThrow(refusal);
  };

  it('refuses a worker with no ranks, or fewer or more than its sizes say', () => {
    expectRefused('destination', { ...destination, ranks: [] }, 'destination.ranks', /tpSize × ppSize = 1/);
    expectRefused('source', { ...source, ranks: source.ranks.slice(1) }, 'source.ranks', /tpSize × ppSize = 2/);
    expectRefused('source', { ...source, ranks: [...source.ranks, source.ranks[0]!] }, 'source.ranks', /= 2/);
    expectRefused('source', { ...source, tpSize: 0, ranks: [] }, 'source.ranks', /and at least one/);
  });

  it('refuses a rank that is no valid part, or whose banks are not all there', () => {
    expectRefused('source', { ...source, ranks: [null as never, source.ranks[1]!] }, 'source.ranks[0]', /rank part/);
    const [first, second] = source.ranks as [RankPart, RankPart];
    const bankless = { ...second, banks: second.banks.slice(1) };
    expectRefused(
      'source',
      { ...source, ranks: [first, bankless] },
      'source.ranks[1].banks',
      /has 55 banks; layer-separate needs/,
    );
  });

  it("refuses a rank out of its place, or of other sizes or another geometry than the worker's", () => {
    const [first, second] = source.ranks as [RankPart, RankPart];
    expectRefused('source', { ...source, ranks: [second, first] }, 'source.ranks[0].parallel.tpRank', /must be 0/);
    const wider = worker(qwen, 4);
    expectRefused(
      'source',
      { ...wider, ranks: source.ranks.concat(source.ranks) },
      'source.ranks[0].parallel.tpSize',
      /must be 4/,
    );
    const fp16 = worker({ ...qwen, dtype: 'fp16' }, 1);
    expectRefused(
      'destination',
      { ...destination, ranks: fp16.ranks },
      'destination.ranks[0].geometry.dtype',
      /"bf16"/,
    );
  });

  it('still plans for the workers assembleWorker returns', () => {
    expect(checkCompatibility(source, destination).ok).toBe(true);
    expect(buildTransferTemplate(source, destination).routeCount).toBe(2 * 28 * 2);
  });
});
