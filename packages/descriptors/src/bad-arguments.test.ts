import { describe, expect, it } from 'vitest';
import { rankPartsFor, workerFor } from '../test/support.js';
import {
  assembleWorker,
  bankCount,
  bankSpan,
  buildTransferTemplate,
  bytesPerElement,
  checkCompatibility,
  deriveShard,
  elementOffset,
  InvalidBankLayoutError,
  InvalidGeometryError,
  InvalidRankPartError,
  InvalidShardError,
  InvalidTransferTemplateError,
  locatePiece,
  minimumBlockStride,
  pieceBytes,
  prepareTransfer,
  rankBlockBytes,
  rankPartOf,
  referenceGeometries,
  safeParseGeometry,
  safeParseRankPart,
  serializeRankPart,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const shard = deriveShard(qwen, { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 });
const worker = workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 });

function withThrowingGetter(input: object, field: string): object {
  return Object.defineProperty({ ...input }, field, {
    enumerable: true,
    get: () => {
      throw new Error('unreadable');
    },
  });
}

describe('safeParse never throws', () => {
  it('reports an input whose getter throws as a failure', () => {
    const geometry = safeParseGeometry(withThrowingGetter(qwen, 'numLayers'));
    expect(geometry.success).toBe(false);
    if (!geometry.success) {
      expect(geometry.error).toBeInstanceOf(InvalidGeometryError);
      expect(geometry.error.issues.map((issue) => issue.field)).toEqual(['numLayers']);
      expect(geometry.error.cause).toEqual(new Error('unreadable'));
    }
    const [part] = rankPartsFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 });
    const rankPart = safeParseRankPart(withThrowingGetter(serializeRankPart(part!), 'workerId'));
    expect(rankPart.success).toBe(false);
    if (!rankPart.success) {
      expect(rankPart.error).toBeInstanceOf(InvalidRankPartError);
      expect(rankPart.error.message).toMatch(/unreadable/);
      expect(rankPart.error.issues.map((issue) => issue.field)).toEqual(['workerId']);
      expect(rankPart.error.cause).toEqual(new Error('unreadable'));
    }
  });
});

describe('serializeRankPart refuses a part that throws while it is read', () => {
  it('with InvalidRankPartError naming the field, keeping what it threw as the cause', () => {
    const [part] = rankPartsFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 });
    const bank = withThrowingGetter(part!.banks[0]!, 'blockStride');
    const unreadable = { ...part!, banks: [bank, ...part!.banks.slice(1)] } as never;
    let refusal: unknown;
    try {
      serializeRankPart(unreadable);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(InvalidRankPartError);
    expect(refusal).toMatchObject({
      workerId: part!.workerId,
      rank: { tpRank: 0, ppRank: 0 },
      issues: [{ field: 'banks[0].blockStride', value: undefined, rule: 'could not be read: unreadable' }],
      cause: new Error('unreadable'),
    });
  });

  it('naming the field whose getter gives a bad value once, then throws while the refusal is worded', () => {
    const [part] = rankPartsFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 });
    let reads = 0;
    const badOnce = Object.defineProperty({ ...part! }, 'version', {
      enumerable: true,
      get: () => {
        reads++;
        if (reads > 1) throw new RangeError('read again');
        return 9;
      },
    });
    expect(() => serializeRankPart(badOnce as never)).toThrow(
      expect.objectContaining({
        code: 'INVALID_RANK_PART',
        workerId: part!.workerId,
        issues: [{ field: 'version', value: undefined, rule: 'could not be read: read again' }],
        cause: new RangeError('read again'),
      }),
    );
  });

  it('naming the root when what threw cannot be found again', () => {
    const [part] = rankPartsFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 });
    let reads = 0;
    const once = Object.defineProperty({ ...part! }, 'workerId', {
      enumerable: true,
      get: () => {
        reads++;
        if (reads === 1) throw new RangeError('first read');
        return part!.workerId;
      },
    });
    expect(() => serializeRankPart(once as never)).toThrow(
      expect.objectContaining({
        code: 'INVALID_RANK_PART',
        issues: [{ field: '(root)', value: undefined, rule: 'could not be read: first read' }],
        cause: new RangeError('first read'),
      }),
    );
  });
});

describe('bad arguments get typed errors naming them', () => {
  it('refuses an unknown dtype', () => {
    expect(() => bytesPerElement('x' as never)).toThrow(InvalidGeometryError);
    expect(() => bytesPerElement('x' as never)).toThrow(/dtype = "x"/);
  });

  it('refuses a geometry or shard that is no object in the byte geometry', () => {
    expect(() => pieceBytes(null as never, shard)).toThrow(InvalidGeometryError);
    expect(() => pieceBytes(qwen, null as never)).toThrow(InvalidShardError);
    expect(() => bankCount(null as never, shard)).toThrow(/geometry = null/);
    expect(() => bankCount(qwen, undefined as never)).toThrow(/shard = undefined/);
    expect(() => minimumBlockStride(null as never, shard)).toThrow(InvalidGeometryError);
    expect(() => minimumBlockStride(qwen, null as never)).toThrow(InvalidShardError);
    expect(() => elementOffset(null as never, 1, 0, 0, 0)).toThrow(InvalidGeometryError);
    expect(() => bankSpan(null as never, 1, 2)).toThrow(InvalidBankLayoutError);
    expect(() => bankSpan(null as never, 1, 2)).toThrow(/bank = null/);
  });

  it('refuses a geometry, shard or bank whose fields the byte geometry reads are missing or bad, naming the field', () => {
    const issue = (field: string) => expect.objectContaining({ issues: [expect.objectContaining({ field })] });
    const shardIssue = (field: string) => expect.objectContaining({ issue: expect.objectContaining({ field }) });
    expect(() => pieceBytes({ ...qwen, headDim: Number.NaN }, shard)).toThrow(InvalidGeometryError);
    expect(() => pieceBytes({ ...qwen, headDim: Number.NaN }, shard)).toThrow(issue('headDim'));
    expect(() => pieceBytes({ blockTokens: 16, dtype: 'bf16' } as never, shard)).toThrow(issue('headDim'));
    expect(() => pieceBytes({ ...qwen, blockTokens: 0 }, shard)).toThrow(issue('blockTokens'));
    expect(() => pieceBytes(qwen, {} as never)).toThrow(InvalidShardError);
    expect(() => pieceBytes(qwen, {} as never)).toThrow(shardIssue('shard.kvHeads'));
    expect(() => pieceBytes(qwen, { kvHeads: { start: 0 } } as never)).toThrow(shardIssue('shard.kvHeads.count'));
    expect(() => elementOffset({ ...qwen, blockTokens: undefined } as never, 1, 0, 0, 0)).toThrow(issue('blockTokens'));
    expect(() => elementOffset({ ...qwen, headOrder: 'HDN' } as never, 1, 0, 0, 0)).toThrow(issue('headOrder'));
    const [bank] = workerFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 }).ranks[0]!.banks;
    expect(() => bankSpan({ ...bank!, blocks: Number.NaN }, 1, 2)).toThrow(InvalidBankLayoutError);
    expect(() => bankSpan({ ...bank!, blocks: Number.NaN }, 1, 2)).toThrow(issue('bank.blocks'));
    expect(() => bankSpan({ blocks: 2 } as never, 1, 2)).toThrow(issue('bank.blockStride'));
    expect(() => bankSpan({ ...bank!, planeStride: 4096 } as never, 1, 2)).toThrow(issue('bank.planeStride'));
    expect(() => bankSpan(bank!, 1.5, 2)).toThrow(issue('piece'));
    expect(() => bankSpan(bank!, 1, 3)).toThrow(issue('planes'));
  });

  it('refuses a geometry, shard or options of bankCount, minimumBlockStride and rankBlockBytes whose fields they read are missing or bad, naming the field', () => {
    const refusal = (code: string, field: string, value: unknown) =>
      expect.objectContaining({ code, issues: [expect.objectContaining({ field, value })] });
    const shardRefusal = (field: string, value: unknown) =>
      expect.objectContaining({ code: 'INVALID_SHARD', issue: expect.objectContaining({ field, value }) });
    expect(() => bankCount({ ...qwen, bankLayout: 'striped' } as never, shard)).toThrow(
      refusal('INVALID_GEOMETRY', 'bankLayout', 'striped'),
    );
    expect(() => bankCount({ ...qwen, kvPlanes: Number.NaN } as never, shard)).toThrow(
      refusal('INVALID_GEOMETRY', 'kvPlanes', Number.NaN),
    );
    expect(() => bankCount(qwen, { ...shard, layers: { start: 0, count: -28 } })).toThrow(
      shardRefusal('shard.layers.count', -28),
    );
    expect(() => bankCount(qwen, shard, null as never)).toThrow(refusal('INVALID_BANK_LAYOUT', 'options', null));
    expect(() => bankCount(qwen, shard, { planeStrided: 'yes' } as never)).toThrow(
      refusal('INVALID_BANK_LAYOUT', 'options.planeStrided', 'yes'),
    );
    expect(() => minimumBlockStride({ ...qwen, bankLayout: undefined } as never, shard)).toThrow(
      refusal('INVALID_GEOMETRY', 'bankLayout', undefined),
    );
    const fullyContiguous = { ...qwen, bankLayout: 'fully-contiguous' as const };
    expect(() => minimumBlockStride({ ...fullyContiguous, kvPlanes: 3 } as never, shard)).toThrow(
      refusal('INVALID_GEOMETRY', 'kvPlanes', 3),
    );
    expect(() => minimumBlockStride(fullyContiguous, { ...shard, layers: undefined } as never)).toThrow(
      shardRefusal('shard.layers', undefined),
    );
    expect(() => rankBlockBytes({ ...qwen, kvPlanes: '2' } as never, shard)).toThrow(
      refusal('INVALID_GEOMETRY', 'kvPlanes', '2'),
    );
    expect(() => rankBlockBytes(qwen, { ...shard, layers: { start: 0, count: 1.5 } })).toThrow(
      shardRefusal('shard.layers.count', 1.5),
    );
    expect(() => rankBlockBytes(null as never, shard)).toThrow(refusal('INVALID_GEOMETRY', 'geometry', null));
  });

  it('refuses an element of elementOffset outside the piece or a head count that is no count, naming it', () => {
    const refusal = (field: string, value: unknown) =>
      expect.objectContaining({
        code: 'INVALID_GEOMETRY',
        issues: [expect.objectContaining({ field, value })],
      });
    // Qwen3-0.6B: 64 tokens per block, head dim 128; a rank holding 8 heads.
    for (const headCount of [0, -1, 1.5, Number.NaN, 2 ** 31, '8']) {
      expect(() => elementOffset(qwen, headCount as never, 0, 0, 0)).toThrow(refusal('headCount', headCount));
    }
    for (const head of [-1, 8, 0.5, Number.NaN, undefined]) {
      expect(() => elementOffset(qwen, 8, head as never, 0, 0)).toThrow(refusal('head', head));
    }
    for (const token of [-1, 64, Number.POSITIVE_INFINITY]) {
      expect(() => elementOffset(qwen, 8, 0, token, 0)).toThrow(refusal('token', token));
    }
    for (const dim of [-1, 128, '0']) {
      expect(() => elementOffset(qwen, 8, 0, 0, dim as never)).toThrow(refusal('dim', dim));
    }
    expect(() => elementOffset(qwen, 8, 8, 0, 128)).toThrow(
      'invalid KV geometry: head = 8: must be an integer in [0, headCount) = [0, 8); ' +
        'dim = 128: must be an integer in [0, headDim) = [0, 128)',
    );
    expect(elementOffset(qwen, 8, 7, 63, 127)).toBe(((7 * 64 + 63) * 128 + 127) * 2);
  });

  it('refuses workers, parts and ranks that are no objects', () => {
    expect(() => assembleWorker(null as never)).toThrow(InvalidRankPartError);
    expect(() => assembleWorker(null as never)).toThrow(/parts = null/);
    expect(() => checkCompatibility(null as never, worker)).toThrow(/source = null/);
    expect(() => checkCompatibility(worker, { geometry: null } as never)).toThrow(/destination = /);
    expect(() => rankPartOf(worker, null as never)).toThrow(/rank = null/);
    expect(() => rankPartOf(null as never, { tpRank: 0, ppRank: 0 })).toThrow(/worker = null/);
  });

  it('refuses a rank of rankPartOf whose tpRank or ppRank is no rank index, naming it', () => {
    const refusal = (field: string, value: unknown) =>
      expect.objectContaining({
        code: 'INVALID_RANK_PART',
        issues: [{ field, value, rule: 'must be an integer in [0, 2^31)' }],
      });
    for (const tpRank of [0.5, -1, Number.NaN, '0']) {
      expect(() => rankPartOf(worker, { tpRank, ppRank: 0 } as never)).toThrow(refusal('rank.tpRank', tpRank));
    }
    expect(() => rankPartOf(worker, { tpRank: 0 } as never)).toThrow(refusal('rank.ppRank', undefined));
    expect(rankPartOf(worker, { tpRank: 1, ppRank: 0 })).toBeUndefined();
    expect(() => buildTransferTemplate(null as never, worker)).toThrow(InvalidRankPartError);
    expect(() => prepareTransfer(null as never)).toThrow(InvalidTransferTemplateError);
    expect(() => prepareTransfer(null as never)).toThrow(/request/);
  });

  it('refuses a part to locate a piece in that is no object, or no valid rank part', () => {
    expect(() => locatePiece(null as never, 0, 0, 0)).toThrow(InvalidRankPartError);
    expect(() => locatePiece(null as never, 0, 0, 0)).toThrow(/part = null/);
    // A part put together by hand, never parsed: too few banks for its layers and planes.
    const [part] = rankPartsFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 });
    expect(() => locatePiece({ ...part!, banks: part!.banks.slice(0, 1) }, 0, 27, 1)).toThrow(
      expect.objectContaining({ code: 'INVALID_RANK_PART', workerId: part!.workerId }),
    );
  });
});
