import assert from 'node:assert/strict';
import type { RankPart } from '@kvreuse/descriptors';
import {
  encodeRankPartRecord,
  parseRankPartKey,
  rankPartKey,
  RankPartRefusedError,
  safeDecodeRankPartRecord,
} from '@kvreuse/discovery';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { fuzz } from './fuzz-run.js';
import { mutatedBytes, mutatedJson, mutatedText } from './mutations.js';
import { decodeParts, rankPartSamples } from './samples.js';

const [part] = decodeParts as [RankPart];
const key = rankPartKey(part, part.parallel);
const encoder = new TextEncoder();

function checkRecord(bytes: Uint8Array): void {
  const result = safeDecodeRankPartRecord(key, bytes);
  if (result.success) {
    const again = safeDecodeRankPartRecord(
      key,
      encoder.encode(encodeRankPartRecord(result.data.part, result.data.epoch)),
    );
    assert.deepEqual(again, result);
    return;
  }
  assert.ok(result.error instanceof RankPartRefusedError);
  assert.equal(result.error.key, key);
}

describe('discovery records', () => {
  it('a record whose part was mutated and its checksum recomputed is decoded to a valid part, or refused', () => {
    // Encoding recomputes the checksum, so the mutations reach the part's parser rather than the checksum.
    const records = fc.tuple(mutatedJson(rankPartSamples[0]!), fc.oneof(fc.nat(), fc.constantFrom(-1, 2 ** 53, 0.5)));
    fuzz('rank part record (checksum recomputed)', records, ([mutated, epoch]) =>
      checkRecord(encoder.encode(encodeRankPartRecord(mutated as RankPart, epoch))),
    );
  });

  it('a record with bytes changed after its checksum was computed is refused', () => {
    const written = encoder.encode(encodeRankPartRecord(part, 1));
    fuzz('rank part record (bytes)', mutatedBytes([written]), (bytes) => {
      // Only the bytes its writer encoded decode, even where a change parses to the same values (`-0`, spaces).
      assert.equal(safeDecodeRankPartRecord(key, bytes).success, Buffer.compare(bytes, written) === 0);
      checkRecord(bytes);
    });
  });

  it('a key is a rank-part key only if it is exactly the key of the worker, incarnation and rank it names', () => {
    fuzz(
      'rank part key',
      mutatedText([key, rankPartKey({ workerId: 'w', incarnation: 'i' }, { tpRank: 12, ppRank: 3 })]),
      (text) => {
        const named = parseRankPartKey(text);
        if (named !== undefined) assert.equal(rankPartKey(named, named), text);
      },
    );
  });
});
