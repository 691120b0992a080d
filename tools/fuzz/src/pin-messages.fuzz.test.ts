import assert from 'node:assert/strict';
import { encodePinMessage, PinMessageError, safeParsePinMessage } from '@kvreuse/endpoint';
import { describe, it } from 'vitest';
import { fuzz } from './fuzz-run.js';
import { mutatedBytes } from './mutations.js';
import { pinMessageSamples } from './samples.js';

describe('pin messages', () => {
  it('a notification parses to the one message whose encoding it is, or is refused with PinMessageError', () => {
    fuzz('pin message', mutatedBytes(pinMessageSamples), (bytes) => {
      const result = safeParsePinMessage(bytes);
      if (result.success) {
        // The codec is canonical: bytes that parse are exactly the encoding of what they parse to.
        assert.deepEqual(encodePinMessage(result.data), bytes);
        return;
      }
      assert.ok(result.error instanceof PinMessageError);
    });
  });
});
