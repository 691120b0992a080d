import { describe, expect, it } from 'vitest';
import { rankPartsFor } from '../test/support.js';
import {
  assembleWorker,
  InvalidRankPartError,
  locatePiece,
  parseRankPart,
  type RankPart,
  type RankPartWire,
  referenceGeometries,
  safeParseRankPart,
  serializeRankPart,
} from './index.js';

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
    expect(sent.banks[0]).toEqual({
      memKind: 'dram',
      deviceId: 0,
      address: '139637976727552',
      bytes: '262144',
      blocks: 4,
      blockStride: '65536',
    });
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
    expect(result.error).toMatchObject({
      code: 'INVALID_RANK_PART',
      workerId: 'decode-worker',
      rank: { tpRank: 0, ppRank: 0 },
    });
    expect(result.error.issues.map((issue) => issue.field).sort()).toEqual([
      'banks[1].bytes',
      'banks[2].blockStride',
      'extra',
      'role',
      'transport.metadata',
    ]);
    expect(result.error.message).toMatch(/^invalid rank part of worker "decode-worker" rank \(tp 0, pp 0\): /);
    expect(() => parseRankPart(bad)).toThrow(InvalidRankPartError);
    expect(() => parseRankPart(null)).toThrow(/invalid rank part: \(root\) = null/);
  });

  it("states each field's rule in the package's own words", () => {
    const rulesOf = (input: unknown): string[] => {
      const result = safeParseRankPart(input);
      if (result.success) throw new Error('expected the part to be rejected');
      return result.error.issues.map((issue) => `${issue.field}: ${issue.rule}`);
    };
    const sent = wire();
    expect(
      rulesOf({
        ...sent,
        version: 4,
        workerId: '',
        incarnation: 7,
        role: 'encode',
        parallel: { ...sent.parallel, tpRank: -1, ppSize: 0 },
        transport: { ...sent.transport, agentName: '', generation: 1.5, metadata: '!!' },
        host: 'h'.repeat(256),
      }),
    ).toEqual([
      'version: must be 1, 2 or 3',
      'workerId: must be a non-empty string',
      'incarnation: must be a non-empty string',
      "role: must be 'prefill', 'decode' or 'aggregated'",
      'parallel.tpRank: must be an integer in [0, 2^31)',
      'parallel.ppSize: must be a positive integer below 2^31',
      'transport.agentName: must be a non-empty string',
      'transport.generation: must be an integer in [0, 2^31)',
      'transport.metadata: must be a base64 string',
      'host: must be a string of 1 to 255 characters',
    ]);
    const [bank] = sent.banks;
    expect(
      rulesOf({ ...sent, banks: [{ ...bank!, memKind: 'hbm', deviceId: -1, address: 5, blocks: 0 }, null] }),
    ).toEqual([
      "banks[0].memKind: must be 'dram' or 'vram'",
      'banks[0].deviceId: must be an integer in [0, 2^31)',
      'banks[0].address: must be an unsigned integer as a decimal string',
      'banks[0].blocks: must be a positive integer below 2^31',
      'banks[1]: must be a bank object',
    ]);
    expect(rulesOf({ ...sent, banks: [] })).toEqual(['banks: must hold at least one bank']);
    expect(rulesOf({ ...sent, parallel: null, transport: 3, geometry: 'qwen' })).toEqual([
      'geometry: must be a KV geometry object',
      'parallel: must be { tpRank, tpSize, ppRank, ppSize, dpRank }',
      'transport: must be { agentName, generation, metadata }',
    ]);
    expect(rulesOf(null)).toEqual(['(root): must be a rank part object']);
  });

  it('needs one bank per (local layer, plane) when layer-separate, one bank when fully contiguous', () => {
    const short = wire();
    short.banks.pop();
    expect(issuesOf(short)).toEqual([['banks', short.banks]]);
    expect(safeParseRankPart(short)).toMatchObject({
      error: {
        message: expect.stringMatching(
          /has 3 banks; layer-separate needs one bank per \(local layer, plane\): 2 × 2 = 4/,
        ),
      },
    });
    const contiguous = wire();
    contiguous.geometry = { ...contiguous.geometry, bankLayout: 'fully-contiguous' };
    expect(issuesOf(contiguous)[0]?.[0]).toBe('banks');
  });

  it('needs strides of at least one piece and banks that hold their blocks', () => {
    const small = wire();
    small.banks[0]!.blockStride = '65535';
    small.banks[1]!.bytes = '262143';
    expect(issuesOf(small)).toEqual([
      ['banks[0].blockStride', '65535'],
      ['banks[1].bytes', '262143'],
    ]);
    const contiguous = wire();
    contiguous.geometry = { ...contiguous.geometry, bankLayout: 'fully-contiguous' };
    contiguous.banks = [{ ...contiguous.banks[0]!, blockStride: '131072', bytes: '1048576' }];
    expect(safeParseRankPart(contiguous)).toMatchObject({
      error: {
        message: expect.stringMatching(/must be at least 262144 bytes \(one block of all local layers and planes/),
      },
    });
  });

  it('rejects overlapping banks in the same memory, not across devices', () => {
    const overlapping = wire();
    overlapping.banks[3]!.address = (BigInt(overlapping.banks[1]!.address) + 4096n).toString();
    // Moved 4 KiB into bank 1, bank 3 now also covers the start of bank 2.
    expect(issuesOf(overlapping)).toEqual([
      ['banks[3].address', overlapping.banks[3]!.address],
      ['banks[2].address', overlapping.banks[2]!.address],
    ]);
    expect(safeParseRankPart(overlapping)).toMatchObject({
      error: { message: expect.stringMatching(/banks\[3\].address = "\d+": overlaps banks\[1\], which ends at/) },
    });
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
    // A size that splits the heads but no deployment has: assembling its worker would list 2^24 missing ranks.
    const huge = wire();
    huge.parallel = { ...huge.parallel, tpSize: 2 ** 24 };
    expect(issuesOf(huge)).toEqual([['parallel', huge.parallel]]);
    expect(() => parseRankPart(huge)).toThrow('tpSize × ppSize = 16777216 ranks; a worker has at most 65536');
  });

  it('refuses to serialize an invalid part, with the same typed error', () => {
    const overlapping = { ...part!, banks: part!.banks.map((bank) => ({ ...bank, address: part!.banks[0]!.address })) };
    expect(() => serializeRankPart(overlapping)).toThrow(InvalidRankPartError);
    expect(() => serializeRankPart(overlapping)).toThrow(/banks\[1\].address = 139637976727552n: overlaps banks\[0\]/);
  });

  it('refuses to serialize a part whose fields break their own rules with the same typed error, naming each field once', () => {
    const refusal = (input: unknown) => {
      try {
        serializeRankPart(input as RankPart);
      } catch (error) {
        return error;
      }
      throw new Error('expected the part to be refused');
    };
    const withBank = (change: object): RankPart => ({
      ...part!,
      banks: [{ ...part!.banks[0]!, ...change }, ...part!.banks.slice(1)],
    });
    const [bank] = part!.banks;
    expect(refusal(withBank({ blockStride: 2n ** 64n }))).toMatchObject({
      code: 'INVALID_RANK_PART',
      workerId: part!.workerId,
      issues: [{ field: 'banks[0].blockStride', value: 2n ** 64n, rule: 'must fit in 64 bits' }],
    });
    expect(refusal(withBank({ blocks: 0 }))).toMatchObject({
      code: 'INVALID_RANK_PART',
      issues: [{ field: 'banks[0].blocks', value: 0, rule: 'must be a positive integer below 2^31' }],
    });
    expect(refusal(withBank({ address: -1n }))).toMatchObject({
      code: 'INVALID_RANK_PART',
      issues: [{ field: 'banks[0].address', value: -1n, rule: 'must be an unsigned 64-bit bigint' }],
    });
    expect(refusal({ ...part!, geometry: { ...part!.geometry, blockTokens: 2 ** 40 } })).toMatchObject({
      code: 'INVALID_RANK_PART',
      issues: [{ field: 'geometry.blockTokens', value: 2 ** 40, rule: 'must be a positive integer below 2^31' }],
    });
    expect(refusal({ ...part!, geometry: { ...part!.geometry, numLayers: -1 } })).toMatchObject({
      code: 'INVALID_RANK_PART',
      issues: [{ field: 'geometry.numLayers', value: -1, rule: 'must be a positive integer below 2^31' }],
    });
    const unencodable = withBank({ blockStride: 2n ** 64n });
    expect(() => assembleWorker([unencodable])).toThrow(expect.objectContaining({ code: 'INVALID_RANK_PART' }));
    expect(() => locatePiece(unencodable, 0, 0, 0)).toThrow(expect.objectContaining({ code: 'INVALID_RANK_PART' }));
    // The rules between fields still hold for a part whose fields are each valid.
    expect(refusal(withBank({ bytes: bank!.bytes - 1n }))).toMatchObject({
      code: 'INVALID_RANK_PART',
      issues: [{ field: 'banks[0].bytes', value: bank!.bytes - 1n }],
    });
  });

  it('rejects other schema versions', () => {
    expect(issuesOf({ ...wire(), version: 4 })).toEqual([['version', 4]]);
    expect(issuesOf({ ...wire(), version: 0 })).toEqual([['version', 0]]);
  });

  it('reads the host a version 3 part names, and refuses one in an older part', () => {
    expect(parseRankPart({ ...wire(), version: 3, host: 'node-a' }).host).toBe('node-a');
    expect(parseRankPart({ ...wire(), version: 3 }).host).toBeUndefined();
    expect(serializeRankPart(parseRankPart({ ...wire(), version: 3, host: 'node-a' })).host).toBe('node-a');
    expect(safeParseRankPart({ ...wire(), version: 2, host: 'node-a' })).toMatchObject({
      error: { message: expect.stringMatching(/host.*needs rank part version 3/) },
    });
    expect(issuesOf({ ...wire(), version: 3, host: '' })).toEqual([['host', '']]);
  });

  it('returns frozen parts', () => {
    const parsed = parseRankPart(wire());
    expect(
      Object.isFrozen(parsed) &&
        Object.isFrozen(parsed.banks) &&
        Object.isFrozen(parsed.banks[0]) &&
        Object.isFrozen(parsed.geometry),
    ).toBe(true);
  });
});

describe('plane-strided banks (version 2)', () => {
  // Two layers of 4 blocks, 65,536-byte pieces (four heads of Qwen3-0.6B per rank).
  const piece = 65_536n;
  const base = 0x7f00_0000_0000n;
  const layerBanks = (blockStride: bigint, planeStride: bigint, bytes: bigint): RankPartWire['banks'] =>
    [0n, 1n].map((layer) => ({
      memKind: 'dram',
      deviceId: 0,
      address: (base + layer * 2n ** 30n).toString(),
      bytes: bytes.toString(),
      blocks: 4,
      blockStride: blockStride.toString(),
      planeStride: planeStride.toString(),
    }));
  const strided = (banks: RankPartWire['banks'], version: 1 | 2 = 2): RankPartWire => ({ ...wire(), version, banks });

  it("describe vLLM's per-layer (blocks, 2, …) interleaved K/V as one bank per layer, and round-trip", () => {
    const interleaved = strided(layerBanks(2n * piece, piece, 8n * piece));
    const parsed = parseRankPart(interleaved);
    expect(parsed.banks[1]).toMatchObject({ blockStride: 2n * piece, planeStride: piece });
    expect(serializeRankPart(parsed)).toEqual(interleaved);
  });

  it("describe vLLM's per-layer (2, blocks, …) K half and V half as one bank per layer", () => {
    expect(parseRankPart(strided(layerBanks(piece, 4n * piece, 8n * piece))).banks[0]).toMatchObject({
      blockStride: piece,
      planeStride: 4n * piece,
    });
    expect(issuesOf(strided(layerBanks(piece, 4n * piece, 8n * piece - 1n)))).toEqual([
      ['banks[0].bytes', (8n * piece - 1n).toString()],
      ['banks[1].bytes', (8n * piece - 1n).toString()],
    ]);
  });

  it('still refuses the same memory described as two strided K and V banks that overlap, and says how to describe it', () => {
    const kv = wire();
    kv.banks = kv.banks.map((bank, index) => ({
      ...bank,
      address: (base + BigInt(index >> 1) * 2n ** 30n + BigInt(index & 1) * piece).toString(),
      blockStride: (2n * piece).toString(),
      bytes: (8n * piece).toString(),
    }));
    expect(safeParseRankPart(kv)).toMatchObject({
      error: {
        message: expect.stringMatching(
          /banks\[1\].address = "\d+": overlaps banks\[0\], which ends at \d+ \(planes interleaved in one allocation are one bank per layer with planeStride\)/,
        ),
      },
    });
  });

  it('refuses planes that overlap each other, naming the blocks that collide', () => {
    expect(safeParseRankPart(strided(layerBanks(2n * piece, piece - 1n, 8n * piece)))).toMatchObject({
      error: {
        message: expect.stringMatching(
          /banks\[0\].planeStride = "65535": the planes overlap: plane 1 of block b overlaps plane 0 of block b \+ 0/,
        ),
      },
    });
    expect(issuesOf(strided(layerBanks(2n * piece, 2n * piece, 10n * piece)))[0]).toEqual([
      'banks[0].planeStride',
      (2n * piece).toString(),
    ]);
    expect(safeParseRankPart(strided(layerBanks(piece, 2n * piece, 8n * piece)))).toMatchObject({
      error: { message: expect.stringMatching(/plane 0 of block b \+ 2 /) },
    });
  });

  it('needs version 2, layer-separate banks, every bank or none, and one bank per local layer', () => {
    expect(issuesOf(strided(layerBanks(2n * piece, piece, 8n * piece), 1))).toEqual([
      ['banks[0].planeStride', piece.toString()],
      ['banks[1].planeStride', piece.toString()],
    ]);
    expect(safeParseRankPart(strided(layerBanks(2n * piece, piece, 8n * piece), 1))).toMatchObject({
      error: { message: expect.stringMatching(/needs rank part version 2/) },
    });
    const mixed = strided(layerBanks(2n * piece, piece, 8n * piece));
    delete (mixed.banks[1] as { planeStride?: string }).planeStride;
    expect(issuesOf(mixed)).toEqual([['banks[1].planeStride', undefined]]);
    const contiguous = strided(layerBanks(4n * piece, piece, 16n * piece).slice(0, 1));
    contiguous.geometry = { ...contiguous.geometry, bankLayout: 'fully-contiguous' };
    expect(safeParseRankPart(contiguous)).toMatchObject({
      error: { message: expect.stringMatching(/planeStride = "65536": applies to layer-separate banks only/) },
    });
    const perPlane = strided([
      ...layerBanks(2n * piece, piece, 8n * piece),
      ...layerBanks(2n * piece, piece, 8n * piece),
    ]);
    expect(safeParseRankPart(perPlane)).toMatchObject({
      error: {
        message: expect.stringMatching(/has 4 banks; plane-strided layer-separate needs one bank per local layer: 2/),
      },
    });
  });

  it('reads a version 2 part without plane strides like a version 1 part', () => {
    expect(parseRankPart({ ...wire(), version: 2 }).banks).toEqual(parseRankPart(wire()).banks);
  });
});
