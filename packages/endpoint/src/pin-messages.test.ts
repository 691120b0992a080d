import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EndpointOptionError, PinMessageError, PinTooLargeError } from './errors.js';
import { pinMessage as message } from '../test/support/pin-message-arbitrary.js';
import {
  encodePinMessage,
  looksLikePinMessage,
  maxPinBlocks,
  maxPinMessageBytes,
  parsePinMessage,
  safeParsePinMessage,
  type PinMessage,
} from './pin-messages.js';

function parseOnlyFailsTyped(bytes: Uint8Array): void {
  try {
    parsePinMessage(bytes);
  } catch (error) {
    expect(error).toBeInstanceOf(PinMessageError);
  }
}

describe('pin messages', () => {
  it('round-trip through encode and parse, each within one notification', () => {
    fc.assert(
      fc.property(message, (original) => {
        const bytes = encodePinMessage(original);
        expect(bytes.length).toBeLessThanOrEqual(maxPinMessageBytes);
        expect(parsePinMessage(bytes)).toEqual(original);
      }),
    );
  });

  it('truncated bytes fail with the typed error naming the truncation', () => {
    fc.assert(
      fc.property(message, fc.nat(), (original, cut) => {
        const bytes = encodePinMessage(original);
        const truncated = bytes.subarray(0, cut % bytes.length);
        const parsed = safeParsePinMessage(truncated);
        expect(parsed.success).toBe(false);
        const reason = parsed.success ? '' : parsed.error.message;
        const [, needs, offset, length] =
          /^invalid pin message: truncated: .+ needs (\d+) bytes at offset (\d+) of (\d+)$/.exec(reason) ?? [];
        expect(Number(length), reason).toBe(truncated.length);
        expect(Number(offset)).toBeLessThanOrEqual(truncated.length);
        expect(Number(offset) + Number(needs)).toBeGreaterThan(truncated.length);
      }),
    );
  });

  it('mutated or random bytes never throw anything but the typed error', () => {
    fc.assert(
      fc.property(
        message,
        fc.array(fc.tuple(fc.nat(), fc.nat({ max: 255 })), { minLength: 1, maxLength: 8 }),
        (original, mutations) => {
          const bytes = encodePinMessage(original).slice();
          for (const [at, value] of mutations) bytes[at % bytes.length] = value;
          parseOnlyFailsTyped(bytes);
        },
      ),
    );
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), parseOnlyFailsTyped));
  });

  it('names the wrong magic, version, kind and trailing bytes', () => {
    const bytes = encodePinMessage({ kind: 'release', pinId: 'p1', sequence: 1 });
    expect(looksLikePinMessage(bytes)).toBe(true);
    expect(looksLikePinMessage(bytes.subarray(1))).toBe(false);
    expect(() => parsePinMessage(Uint8Array.of(0, 0, ...bytes.subarray(2)))).toThrow('magic is 0x0, not a pin message');
    expect(() => parsePinMessage(Uint8Array.of(...bytes.subarray(0, 2), 9, ...bytes.subarray(3)))).toThrow(
      'version 9 is not the version 2',
    );
    expect(() => parsePinMessage(Uint8Array.of(...bytes.subarray(0, 3), 42, ...bytes.subarray(4)))).toThrow(
      'kind 42 is not one of 8 known codes',
    );
    expect(() => parsePinMessage(Uint8Array.of(...bytes, 0))).toThrow('1 bytes after the release message');
  });

  it('refuses a pin too large for one message, saying the limit in blocks', () => {
    const request: PinMessage = {
      kind: 'request',
      pinId: 'p',
      reader: { workerId: 'w', incarnation: 'i', rank: { tpRank: 0, ppRank: 0 } },
      source: { incarnation: 's', epoch: 1 },
      start: 0,
      hashes: new BigUint64Array(maxPinBlocks + 1),
      wantsChecksums: false,
    };
    expect(() => encodePinMessage(request)).toThrow(PinTooLargeError);
    expect(() => encodePinMessage(request)).toThrow(`at most ${maxPinBlocks} blocks per pin`);
    expect(() =>
      encodePinMessage({
        kind: 'grant',
        pinId: 'p',
        grantId: 'g',
        sourceBlocks: new Uint32Array(maxPinBlocks + 1),
        leaseMs: 1,
      }),
    ).toThrow(PinTooLargeError);
  });

  it('refuses to encode a name that does not fit or checksums that do not match the blocks', () => {
    expect(() => encodePinMessage({ kind: 'renew', pinId: 'x'.repeat(65), sequence: 1 })).toThrow(EndpointOptionError);
    expect(() => encodePinMessage({ kind: 'renew', pinId: 'x', sequence: -1 })).toThrow(EndpointOptionError);
    expect(() =>
      encodePinMessage({
        kind: 'grant',
        pinId: 'p',
        grantId: 'g',
        sourceBlocks: new Uint32Array(2),
        checksums: new Uint32Array(1),
        leaseMs: 1,
      }),
    ).toThrow('one per granted block (2)');
  });
});
