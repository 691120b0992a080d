import { describe, expect, it } from 'vitest';
import { rankPartsFor } from '../test/support.js';
import {
  assembleWorker,
  geometryDigest,
  InvalidRankPartError,
  parseRankPart,
  type RankPart,
  rankPartOf,
  referenceGeometries,
  serializeRankPart,
} from './index.js';

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
    expect(rankPartOf(worker, { tpRank: 1, ppRank: 0 })).toEqual(all[1]);
    expect(rankPartOf(worker, { tpRank: 0, ppRank: 1 })).toEqual(all[2]);
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
      {
        rank: { tpRank: 1, ppRank: 1 },
        field: 'incarnation',
        expected: 'decode-worker-incarnation',
        actual: 'restarted',
      },
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

describe('assembleWorker only sees parsed parts', () => {
  const refusal = (given: readonly RankPart[]): unknown => {
    try {
      return assembleWorker(given);
    } catch (error) {
      return error;
    }
  };

  it("keeps the parser's parts as they are", () => {
    const parsed = parts().map((part) => parseRankPart(serializeRankPart(part)));
    const result = assembleWorker(parsed);
    expect(result.complete && result.worker.ranks.every((part, index) => part === parsed[index])).toBe(true);
  });

  it('checks parts the parser never saw and holds frozen parsed copies of them', () => {
    const literal = parts();
    const result = assembleWorker(literal);
    expect(result.complete).toBe(true);
    if (!result.complete) return;
    expect(result.worker.ranks).toEqual(literal);
    expect(result.worker.ranks[0]).not.toBe(literal[0]);
    expect(Object.isFrozen(result.worker.ranks[0]!.banks[0])).toBe(true);
  });

  it('refuses never-parsed parts with overlapping banks, with the parser error', () => {
    const all = parts();
    const banks = all[2]!.banks.map((bank, index) =>
      index === 5 ? { ...bank, address: all[2]!.banks[4]!.address + 4096n } : bank,
    );
    all[2] = { ...all[2]!, banks };
    expect(refusal(all)).toBeInstanceOf(InvalidRankPartError);
    expect(refusal(all)).toMatchObject({
      code: 'INVALID_RANK_PART',
      workerId: 'decode-worker',
      rank: { tpRank: 0, ppRank: 1 },
      issues: expect.arrayContaining([
        expect.objectContaining({ field: 'banks[5].address', rule: expect.stringMatching(/^overlaps banks\[4\]/) }),
      ]),
    });
  });

  it('refuses never-parsed parts whose banks are too small for their blocks', () => {
    const all = parts();
    all[1] = { ...all[1]!, banks: all[1]!.banks.map((bank) => ({ ...bank, bytes: bank.bytes - 1n })) };
    expect(refusal(all)).toMatchObject({
      code: 'INVALID_RANK_PART',
      rank: { tpRank: 1, ppRank: 0 },
      message: expect.stringMatching(
        /banks\[0\].bytes = 262143n: must hold blocks × blockStride = 4 × 65536 = 262144 bytes/,
      ),
    });
  });

  it('refuses parts with addresses as strings (a wire form that was never parsed)', () => {
    const all = parts();
    const wire = serializeRankPart(all[3]!);
    all[3] = wire as unknown as RankPart;
    expect(refusal(all)).toMatchObject({
      code: 'INVALID_RANK_PART',
      rank: { tpRank: 1, ppRank: 1 },
      message: expect.stringMatching(/banks\[0\].address = "\d+": must be an unsigned 64-bit bigint/),
    });
  });
});
