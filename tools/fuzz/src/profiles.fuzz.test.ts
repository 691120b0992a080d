import assert from 'node:assert/strict';
import { kvreuseSettings } from '@kvreuse/cli';
import { InvalidProfileError, parseProfile, safeParseProfile } from '@kvreuse/profile-admission';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { fuzz } from './fuzz-run.js';
import { mutatedJson } from './mutations.js';
import { profileSamples } from './samples.js';

describe('profiles', () => {
  it('a profile read from discovery or a file parses to a profile that round-trips, or is refused naming its fields', () => {
    fuzz('profile', fc.oneof(...profileSamples.map(mutatedJson)), (input) => {
      const result = safeParseProfile(input, { source: 'fuzz', settings: kvreuseSettings });
      if (result.success) {
        // Through JSON and back it is the same profile (compared as JSON: a `-0` read is the `0` written).
        const written = JSON.stringify(result.data);
        assert.equal(JSON.stringify(parseProfile(JSON.parse(written), { settings: kvreuseSettings })), written);
        return;
      }
      assert.ok(result.error instanceof InvalidProfileError);
      assert.ok(result.error.issues.length > 0);
    });
  });
});
