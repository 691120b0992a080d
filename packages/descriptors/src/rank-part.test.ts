import { describe, expect, it } from 'vitest';
import { rankPartsFor } from '../test/support.js';
import { InvalidRankPartError, parseRankPart, type RankPartWire, referenceGeometries, safeParseRankPart, serializeRankPart } from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const [part] = rankPartsFor({ geometry: { ...qwen, numLayers: 2 }, tpSize: 2, ppSize: 1, blocks: 4 });
const wire = (): RankPartWire => structuredClone(serializeRankPart(part!));

function issuesOf(input: unknown): [string, unknown][] {
  const result = safeParseRankPart(input);
  if (result.success) throw new Error('expected the part to be rejected');
  return result.error.issues.map((issue) => [issue.field, issue.value]);
}

describe('rank parts', () => {
  it('travel with 64-bit quantities as decimal strings and round-trip exactly', () => {
    const sent = serializeRankPart(part!);
    expect(sent.banks[0]).toEqual({ memKind: 'dram', deviceId: 0, address: '139637976727552', bytes: '262144', blocks: 4, blockStride: '65536' });
    const received = parseRankPart(JSON.parse(JSON.stringify(sent)));
    expect(received).toEqual(part);
    expect(serializeRankPart(received)).toEqual(sent);
  });

  it('carries addresses up to 2^64 − 1 without loss', () => {
    const high = wire();
    high.banks = [high.banks[0]!];
    high.geometry = { ...high.geometry, numLayers: 1, kvPlanes: 1 };
    high.banks[0]!.address = (2n ** 64n - 262_144n).toString();
    expect(parseRankPart(high).banks[0]!.address).toBe(18_446_744_073_709_289_472n);
    high.banks[0]!.address = (2n ** 64n - 262_143n).toString();
    expect(issuesOf(high)).toEqual([['banks[0].bytes', '262144']]);
    high.banks[0]!.address = (2n ** 64n).toString();
    expect(issuesOf(high)).toEqual([['banks[0].address', '18446744073709551616']]);
  });

  it('rejects malformed fields, naming worker, rank, field and value', () => {
    const bad = wire() as Record<string, unknown> & RankPartWire;
    bad.banks[1]!.bytes = '-5';
    bad.banks[2]!.blockStride = 65536 as unknown as string;
    bad.transport.metadata = 'not base64!';
    bad.role = 'encode' as 'decode';
    bad['extra'] = true;
    const result = safeParseRankPart(bad);
    expect(result.success).toBe(false);
    if (result.success) return;
    expect(result.error).toBeInstanceOf(InvalidRankPartError);
    expect(result.error).toMatchObject({ code: 'INVALID_RANK_PART', workerId: 'decode-worker', rank: { tpRank: 0, ppRank: 0 } });
    expect(result.error.issues.map((issue) => issue.field).sort()).toEqual(['banks[1].bytes', 'banks[2].blockStride', 'extra', 'role', 'transport.metadata']);
    expect(result.error.message).toMatch(/^invalid rank part of worker "decode-worker" rank \(tp 0, pp 0\): /);
    expect(() => parseRankPart(bad)).toThrow(InvalidRankPartError);
    expect(() => parseRankPart(null)).toThrow(/invalid rank part: \(root\) = null/);
  });

  it('needs one bank per (local layer, plane) when layer-separate, one bank when fully contiguous', () => {
    const short = wire();
    short.banks.pop();
    expect(issuesOf(short)).toEqual([['banks', short.banks]]);
    expect(safeParseRankPart(short)).toMatchObject({ error: { message: expect.stringMatching(/has 3 banks; layer-separate needs one bank per \(local layer, plane\): 2 × 2 = 4/) } });
    const contiguous = wire();
    contiguous.geometry = { ...contiguous.geometry, bankLayout: 'fully-contiguous' };
    expect(issuesOf(contiguous)[0]?.[0]).toBe('banks');
  });

  it('needs strides of at least one piece and banks that hold their blocks', () => {
    const small = wire();
    small.banks[0]!.blockStride = '65535';
    small.banks[1]!.bytes = '262143';
    expect(issuesOf(small)).toEqual([['banks[0].blockStride', '65535'], ['banks[1].bytes', '262143']]);
    const contiguous = wire();
    contiguous.geometry = { ...contiguous.geometry, bankLayout: 'fully-contiguous' };
    contiguous.banks = [{ ...contiguous.banks[0]!, blockStride: '131072', bytes: '1048576' }];
    expect(safeParseRankPart(contiguous)).toMatchObject({ error: { message: expect.stringMatching(/must be at least 262144 bytes \(one block of all local layers and planes/) } });
  });

  it('rejects overlapping banks in the same memory, not across devices', () => {
    const overlapping = wire();
    overlapping.banks[3]!.address = (BigInt(overlapping.banks[1]!.address) + 4096n).toString();
    // Moved 4 KiB into bank 1, bank 3 now also covers the start of bank 2.
    expect(issuesOf(overlapping)).toEqual([
      ['banks[3].address', overlapping.banks[3]!.address],
      ['banks[2].address', overlapping.banks[2]!.address],
    ]);
    expect(safeParseRankPart(overlapping)).toMatchObject({ error: { message: expect.stringMatching(/banks\[3\].address = "\d+": overlaps banks\[1\], which ends at/) } });
    overlapping.banks[3]!.deviceId = 1;
    expect(safeParseRankPart(overlapping).success).toBe(true);
  });

  it('checks ranks against sizes and the shard split', () => {
    const outside = wire();
    outside.parallel = { ...outside.parallel, tpRank: 2 };
    expect(issuesOf(outside)).toEqual([['parallel.tpRank', 2]]);
    const uneven = wire();
    uneven.parallel = { ...uneven.parallel, ppSize: 3 };
    expect(issuesOf(uneven)).toEqual([['parallel.ppSize', 3]]);
  });

  it('refuses to serialize an invalid part, with the same typed error', () => {
    const overlapping = { ...part!, banks: part!.banks.map((bank) => ({ ...bank, address: part!.banks[0]!.address })) };
    expect(() => serializeRankPart(overlapping)).toThrow(InvalidRankPartError);
    expect(() => serializeRankPart(overlapping)).toThrow(/banks\[1\].address = 139637976727552n: overlaps banks\[0\]/);
  });

  it('rejects other schema versions', () => {
    expect(issuesOf({ ...wire(), version: 2 })).toEqual([['version', 2]]);
  });
});
