// fast-check's arbitrary pin message, for the codec's and the authentication's property tests.
import fc from 'fast-check';
import { maxPinBlocks, type PinMessage, pinRefusalReasons, pinRevocationReasons } from '../../src/pin-messages.js';

const name = fc.string({ minLength: 1, maxLength: 16 });
const u32 = fc.nat({ max: 0xffffffff });
const blocks = fc.integer({ min: 0, max: maxPinBlocks });

/** Any pin message this build encodes. */
export const pinMessage: fc.Arbitrary<PinMessage> = fc.oneof(
  fc.record({
    kind: fc.constant('request' as const),
    pinId: name,
    reader: fc.record({
      workerId: name,
      incarnation: name,
      rank: fc.record({ tpRank: fc.nat({ max: 0xffff }), ppRank: fc.nat({ max: 0xffff }) }),
    }),
    source: fc.record({ incarnation: name, epoch: u32 }),
    start: u32,
    hashes: fc
      .array(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { maxLength: maxPinBlocks })
      .map((hashes) => BigUint64Array.from(hashes)),
    wantsChecksums: fc.boolean(),
  }),
  fc.tuple(name, name, blocks, fc.boolean(), u32).chain(([pinId, grantId, count, withChecksums, leaseMs]) =>
    fc
      .tuple(
        fc.array(u32, { minLength: count, maxLength: count }),
        fc.array(u32, { minLength: count, maxLength: count }),
      )
      .map(([sourceBlocks, checksums]) =>
        withChecksums
          ? {
              kind: 'grant' as const,
              pinId,
              grantId,
              sourceBlocks: Uint32Array.from(sourceBlocks),
              checksums: Uint32Array.from(checksums),
              leaseMs,
            }
          : { kind: 'grant' as const, pinId, grantId, sourceBlocks: Uint32Array.from(sourceBlocks), leaseMs },
      ),
  ),
  fc.record({ kind: fc.constant('refuse' as const), pinId: name, reason: fc.constantFrom(...pinRefusalReasons) }),
  fc.record({ kind: fc.constant('revoke' as const), pinId: name, reason: fc.constantFrom(...pinRevocationReasons) }),
  fc.record({ kind: fc.constant('renewed' as const), pinId: name, leaseMs: u32 }),
  fc.record({ kind: fc.constantFrom('renew' as const, 'release' as const), pinId: name, sequence: u32 }),
  fc.record({ kind: fc.constant('released' as const), pinId: name }),
);
