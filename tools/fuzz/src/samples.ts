// Valid inputs of every target, built through the packages' public entry points: the fuzzers mutate these.
import {
  assembleWorker,
  layoutRankBanks,
  parseRankPart,
  type RankPart,
  referenceGeometries,
  type Role,
  serializeRankPart,
  type Worker,
} from '@kvreuse/descriptors';
import { encodePinMessage, type PinMessage } from '@kvreuse/endpoint';
import { kvreuseSettings } from '@kvreuse/cli';
import { builtInProfiles } from '@kvreuse/profile-admission';
import type { Json } from './mutations.js';

const geometry = { ...referenceGeometries['qwen3-0.6b'], numLayers: 2 };

function rankPartsOf(role: Role, tpSize: number, blocks: number): RankPart[] {
  const workerId = `${role}-worker`;
  return Array.from({ length: tpSize }, (_, tpRank) => {
    const parallel = { tpRank, tpSize, ppRank: 0, ppSize: 1 };
    const part: RankPart = {
      version: 1,
      workerId,
      incarnation: `${workerId}-1`,
      role,
      geometry,
      parallel: { ...parallel, dpRank: 0 },
      banks: layoutRankBanks(geometry, parallel, { address: 0x7f00_0000_0000n + BigInt(tpRank) * 2n ** 36n, blocks }),
      transport: { agentName: `${workerId}-tp${tpRank}`, generation: 1, metadata: '' },
    };
    // Through the wire form and the parser, as a part read from discovery would come.
    return parseRankPart(serializeRankPart(part));
  });
}

export const decodeParts = rankPartsOf('decode', 2, 16);
export const prefillParts = rankPartsOf('prefill', 1, 8);
export const rankPartSamples: Json[] = [...decodeParts, ...prefillParts].map(
  (part) => serializeRankPart(part) as unknown as Json,
);

function completeWorker(parts: readonly RankPart[]): Worker {
  const result = assembleWorker(parts);
  if (!result.complete) throw new Error(`the fuzzers' sample worker is incomplete: ${JSON.stringify(result)}`);
  return result.worker;
}
export const decodeWorker = completeWorker(decodeParts);
export const prefillWorker = completeWorker(prefillParts);

export const profileSamples: Json[] = builtInProfiles({ settings: kvreuseSettings }).map(
  (profile) => JSON.parse(JSON.stringify(profile)) as Json,
);

const pinMessages: PinMessage[] = [
  {
    kind: 'request',
    pinId: 'pin-1',
    reader: { workerId: 'prefill-worker', incarnation: 'prefill-worker-1', rank: { tpRank: 0, ppRank: 0 } },
    source: { incarnation: 'decode-worker-1', epoch: 3 },
    start: 0,
    hashes: BigUint64Array.from([1n, 2n ** 63n, 2n ** 64n - 1n]),
    wantsChecksums: true,
  },
  {
    kind: 'grant',
    pinId: 'pin-1',
    grantId: '8c1f0e2a9b7d4c3e5f60718293a4b5c6',
    sourceBlocks: Uint32Array.from([4, 5, 6]),
    checksums: Uint32Array.from([7, 8, 9]),
    leaseMs: 5000,
  },
  { kind: 'grant', pinId: 'pin-1', grantId: 'g', sourceBlocks: Uint32Array.from([4]), leaseMs: 1 },
  { kind: 'refuse', pinId: 'pin-1', reason: 'hash-mismatch' },
  { kind: 'revoke', pinId: 'pin-1', reason: 'shutting-down' },
  { kind: 'renewed', pinId: 'pin-1', leaseMs: 5000 },
  { kind: 'renew', pinId: 'pin-1', sequence: 1 },
  { kind: 'release', pinId: 'pin-1', sequence: 0xffffffff },
  { kind: 'released', pinId: 'pin-1' },
];
export const pinMessageSamples: Uint8Array[] = pinMessages.map(encodePinMessage);
