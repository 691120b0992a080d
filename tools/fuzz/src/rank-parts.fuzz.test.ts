import { assembleWorker, InvalidRankPartError, parseRankPart, safeParseRankPart, serializeRankPart } from '@kvreuse/descriptors';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
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
        expect(JSON.stringify(serializeRankPart(parseRankPart(JSON.parse(wire))))).toBe(wire);
        // A parsed part assembles with the worker's other ranks into a worker, or into a typed verdict.
        const others = decodeParts.filter((part) => part.parallel.tpRank !== result.data.parallel.tpRank);
        expect(typeof assembleWorker([result.data, ...others]).complete).toBe('boolean');
        return;
      }
      expect(result.error).toBeInstanceOf(InvalidRankPartError);
      expect(result.error.issues.length).toBeGreaterThan(0);
    });
  });
});
