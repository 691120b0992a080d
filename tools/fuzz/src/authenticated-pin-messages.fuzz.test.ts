import assert from 'node:assert/strict';
import { ClusterSecret } from '@kvreuse/discovery';
import { openPinMessage, PinMessageError, pinMessageRefusals, sealPinBytes, sealPinMessage } from '@kvreuse/endpoint';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { fuzz } from './fuzz-run.js';
import { mutatedBytes } from './mutations.js';
import { pinMessageSamples } from './samples.js';

const secret = ClusterSecret.ofThisProcess();
const sender = 'prefill-worker-tp0';
const receiver = 'decode-worker-tp0';
const sealedSamples = pinMessageSamples.map((bytes) => sealPinBytes(secret, sender, receiver, bytes));

describe('authenticated pin messages', () => {
  it('a notification opens to the one message it seals for its sender and receiver, or is refused with its reason', () => {
    // Mutated notifications (whose tags almost never hold), and mutated messages tagged afresh (so that
    // the decoder behind the tag sees them too).
    const cases = fc.oneof(
      mutatedBytes(sealedSamples),
      mutatedBytes(pinMessageSamples).map((bytes) => sealPinBytes(secret, sender, receiver, bytes)),
    );
    fuzz('authenticated pin message', cases, (notification) => {
      const opened = openPinMessage(secret, sender, receiver, notification);
      if (opened.success) {
        // Canonical: what opens is exactly the sealing of what it opened to.
        assert.deepEqual(sealPinMessage(secret, sender, receiver, opened.data), notification);
        return;
      }
      assert.ok(opened.error instanceof PinMessageError);
      assert.ok(pinMessageRefusals.includes(opened.reason));
    });
  });
});
