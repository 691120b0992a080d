import { createHash } from 'node:crypto';
import { serializeRankPart } from '@kvreuse/descriptors';
import { describe, expect, it } from 'vitest';
import { rankPartsOf } from '@kvreuse-internal/test-support';
import { RankPartRefusedError } from './errors.js';
import { parseRankPartKey, rankPartKey } from './rank-part-keys.js';
import { decodeRankPartRecord, encodeRankPartRecord, safeDecodeRankPartRecord } from './rank-part-record.js';

const [part] = rankPartsOf({ workerId: 'decode-0', incarnation: 'inc-a', tpSize: 2 });
if (part === undefined) throw new Error('fixture');
const key = rankPartKey({ workerId: 'decode-0', incarnation: 'inc-a' }, { tpRank: 0, ppRank: 0 });
const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

/** A record around `partText` as a writer of this version encodes it: epoch 7, the checksum over the epoch and the part. */
function recordOf(partText: string): Uint8Array {
  const checksum = createHash('sha256').update(`7\n${partText}`).digest('hex');
  return bytes(`{"format":"kvreuse.rank-part","version":3,"epoch":7,"sha256":"${checksum}","part":${partText}}`);
}

function refusalOf(value: Uint8Array, at = key): RankPartRefusedError {
  const result = safeDecodeRankPartRecord(at, value);
  if (result.success) throw new Error('expected a refusal');
  return result.error;
}

interface EditableRecord {
  version: unknown;
  epoch?: unknown;
  sha256: unknown;
  part: Record<string, unknown>;
}

function edited(edit: (record: EditableRecord) => void): Uint8Array {
  const record = JSON.parse(encodeRankPartRecord(part!, 7)) as EditableRecord;
  edit(record);
  return bytes(JSON.stringify(record));
}

describe('rank-part records', () => {
  it('round-trips a rank part, 64-bit fields included, in the wire form of the descriptors schema', () => {
    const text = encodeRankPartRecord(part, 7);
    expect((JSON.parse(text) as { part: unknown }).part).toEqual(serializeRankPart(part));
    expect((JSON.parse(text) as { epoch: unknown }).epoch).toBe(7);
    const decoded = decodeRankPartRecord(key, bytes(text));
    expect(decoded).toEqual({ part, epoch: 7 });
    expect(typeof decoded.part.banks[0]?.address).toBe('bigint');
  });

  it('keys name the worker, incarnation and rank, and parse back', () => {
    expect(key).toBe('kvreuse/workers/decode-0/incarnations/inc-a/pp0-tp0');
    const worker = { workerId: 'w', incarnation: '6f1c2a9e-0d4b-4c1e-9a57-3b2d8e7f0c11' };
    expect(parseRankPartKey(rankPartKey(worker, { tpRank: 7, ppRank: 3 }, 'x/'), 'x/')).toEqual({
      ...worker,
      tpRank: 7,
      ppRank: 3,
    });
    expect(parseRankPartKey('kvreuse/workers/w/incarnations/i/pp01-tp0')).toBeUndefined();
    expect(() => rankPartKey({ workerId: 'a/b', incarnation: 'i' }, { tpRank: 0, ppRank: 0 })).toThrow(/workerId/);
    expect(() => rankPartKey({ workerId: 'a', incarnation: '' }, { tpRank: 0, ppRank: 0 })).toThrow(/incarnation/);
  });

  it.each([
    ['not UTF-8', new Uint8Array([0xff, 0xfe])],
    ['not JSON', bytes('{"format":')],
    ['another format', bytes('{"format":"something-else","version":1}')],
    ['a record without its part', bytes('{"format":"kvreuse.rank-part","version":3,"epoch":7,"sha256":"00"}')],
    ['a record without its epoch', edited((record) => delete record.epoch)],
    ['a record whose epoch is not a whole number ≥ 1', edited((record) => (record.epoch = 0.5))],
  ])('refuses %s as malformed', (_name, value) => {
    expect(refusalOf(value).refusal).toBe('malformed');
  });

  it.each([1, 2])(
    'refuses a record version it does not know: %i (version 2 checksummed the part without its epoch)',
    (version) => {
      const error = refusalOf(edited((record) => (record.version = version)));
      expect([error.refusal, error.code]).toEqual(['wrong-version', 'RANK_PART_REFUSED']);
      expect(error.message).toMatch(new RegExp(`record version ${version}; this reader knows version 3`));
    },
  );

  it('refuses a part whose bytes changed after its checksum was taken', () => {
    const error = refusalOf(edited((record) => ((record.part['banks'] as { bytes: string }[])[0]!.bytes = '1')));
    expect(error.refusal).toBe('tampered');
  });

  it('refuses a record whose epoch changed after its checksum was taken (the fuzz target found it: one digit, 7 for 8)', () => {
    const written = encodeRankPartRecord(part, 7);
    const error = refusalOf(bytes(written.replace('"epoch":7,', '"epoch":8,')));
    expect(error).toMatchObject({
      refusal: 'tampered',
      message: expect.stringMatching(/the epoch and part do not match their sha256/),
    });
  });

  it.each([
    [
      'a -0 for a 0 (the fuzz target found it: JSON reads it as the same number, the checksum never saw it)',
      (text: string) => text.replace('"tpRank":0', '"tpRank":-0'),
    ],
    ['a number written another way', (text: string) => text.replace('"epoch":7', '"epoch":7.0')],
    ['a space', (text: string) => text.replace('"part":{', '"part": {')],
    [
      'a character escaped',
      (text: string) => text.replace('"format":"kvreuse.rank-part"', '"format":"kvreuse.rank\\u002dpart"'),
    ],
  ])(
    'refuses a record whose bytes differ from what its writer encoded although they parse to the same values: %s',
    (_name, edit) => {
      const written = encodeRankPartRecord(part, 7);
      const changed = edit(written);
      expect(changed).not.toBe(written);
      expect(refusalOf(bytes(changed)).refusal).toBe('tampered');
    },
  );

  it('refuses a part of a version the descriptors package does not know, even with a matching checksum', () => {
    const wire = { ...serializeRankPart(part), version: 4 };
    const text = JSON.stringify(wire);
    const value = recordOf(text);
    expect(refusalOf(value)).toMatchObject({
      refusal: 'wrong-version',
      message: expect.stringMatching(/rank part version 4; this reader knows versions 1, 2, 3/),
    });
  });

  it.each([
    [2, {}],
    [3, { host: 'node-a' }],
  ] as const)('reads a version %i part', (version, extra) => {
    const text = JSON.stringify({ ...serializeRankPart(part), version, ...extra });
    const value = recordOf(text);
    expect(decodeRankPartRecord(key, value)).toMatchObject({ epoch: 7, part: { version, ...extra } });
  });

  it('refuses a part the descriptors schema refuses, with the schema reason', () => {
    const text = JSON.stringify({ ...serializeRankPart(part), banks: [] });
    const value = recordOf(text);
    const error = refusalOf(value);
    expect(error.refusal).toBe('malformed');
    expect(error.message).toMatch(/banks/);
  });

  it('refuses a valid part stored under another rank, incarnation or worker key', () => {
    const value = bytes(encodeRankPartRecord(part, 7));
    expect(
      refusalOf(value, rankPartKey({ workerId: 'decode-0', incarnation: 'inc-a' }, { tpRank: 1, ppRank: 0 })).refusal,
    ).toBe('misplaced');
    expect(
      refusalOf(value, rankPartKey({ workerId: 'decode-0', incarnation: 'inc-b' }, { tpRank: 0, ppRank: 0 })).refusal,
    ).toBe('misplaced');
    expect(
      refusalOf(value, rankPartKey({ workerId: 'decode-1', incarnation: 'inc-a' }, { tpRank: 0, ppRank: 0 })).refusal,
    ).toBe('misplaced');
    expect(() => decodeRankPartRecord('elsewhere', value)).toThrow(RankPartRefusedError);
  });
});
