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
  minimumBlockStride,
  pieceBytes,
  prepareTransfer,
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
    if (!geometry.success) expect(geometry.error).toBeInstanceOf(InvalidGeometryError);
    const [part] = rankPartsFor({ geometry: qwen, tpSize: 1, ppSize: 1, blocks: 2 });
    const rankPart = safeParseRankPart(withThrowingGetter(serializeRankPart(part!), 'workerId'));
    expect(rankPart.success).toBe(false);
    if (!rankPart.success) {
      expect(rankPart.error).toBeInstanceOf(InvalidRankPartError);
      expect(rankPart.error.message).toMatch(/unreadable/);
    }
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

  it('refuses workers, parts and ranks that are no objects', () => {
    expect(() => assembleWorker(null as never)).toThrow(InvalidRankPartError);
    expect(() => assembleWorker(null as never)).toThrow(/parts = null/);
    expect(() => checkCompatibility(null as never, worker)).toThrow(/source = null/);
    expect(() => checkCompatibility(worker, { geometry: null } as never)).toThrow(/destination = /);
    expect(() => rankPartOf(worker, null as never)).toThrow(/rank = null/);
    expect(() => rankPartOf(null as never, { tpRank: 0, ppRank: 0 })).toThrow(/worker = null/);
    expect(() => buildTransferTemplate(null as never, worker)).toThrow(InvalidRankPartError);
    expect(() => prepareTransfer(null as never)).toThrow(InvalidTransferTemplateError);
    expect(() => prepareTransfer(null as never)).toThrow(/request/);
  });
});
