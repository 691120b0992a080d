import assert from 'node:assert/strict';
import {
  assembleWorker,
  InvalidRankPartError,
  parseRankPart,
  safeParseRankPart,
  serializeRankPart,
} from '@kvreuse/descriptors';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { fuzz } from './fuzz-run.js';
import { mutatedJson } from './mutations.js';
import { decodeParts, rankPartSamples } from './samples.js';

describe('rank parts', () => {
  it('a rank part read from discovery parses to a part that round-trips, or is refused naming its fields', () => {
    const parts = fc.oneof(...rankPartSamples.map(mutatedJson));
    fuzz('rank part', parts, (input) => {
      const result = safeParseRankPart(input);
      if (result.success) {
        // Through JSON and back it is the same part (compared as JSON: a `-0` read is the `0` written).
        const wire = JSON.stringify(serializeRankPart(result.data));
        assert.equal(JSON.stringify(serializeRankPart(parseRankPart(JSON.parse(wire)))), wire);
        // A parsed part assembles with the worker's other ranks into a worker, or into a typed verdict.
        const others = decodeParts.filter((part) => part.parallel.tpRank !== result.data.parallel.tpRank);
        assert.equal(typeof assembleWorker([result.data, ...others]).complete, 'boolean');
        return;
      }
      assert.ok(result.error instanceof InvalidRankPartError);
      assert.ok(result.error.issues.length > 0);
    });
  });
});
