import {
  type Geometry,
  layoutRankBanks,
  parseRankPart,
  type RankPart,
  referenceGeometries,
} from '@kvreuse/descriptors';
import { describe, expect, it } from 'vitest';
import { holdsBlockContent, writeBlockContent } from './kv-content.js';

/** A rank part over simulated banks (plain memory standing in for registered banks), and those banks. */
function simulatedRank(
  geometry: Geometry,
  tpRank: number,
  tpSize: number,
  blocks: number,
): { part: RankPart; banks: Uint8Array[] } {
  const layout = layoutRankBanks(geometry, { tpRank, tpSize, ppRank: 0, ppSize: 1 }, { address: 0n, blocks });
  const part = parseRankPart({
    version: 1,
    workerId: `w-tp${tpSize}`,
    incarnation: 'i',
    role: 'decode',
    geometry,
    parallel: { tpRank, tpSize, ppRank: 0, ppSize: 1, dpRank: 0 },
    banks: layout.map((bank) => ({
      memKind: 'dram',
      deviceId: 0,
      address: String(bank.address),
      bytes: String(bank.bytes),
      blocks: bank.blocks,
      blockStride: String(bank.blockStride),
    })),
    transport: { agentName: 'a', generation: 1, metadata: Buffer.from('x').toString('base64') },
  });
  return { part, banks: layout.map((bank) => new Uint8Array(Number(bank.bytes))) };
}

// A small geometry keeps the test fast; head order is the variable.
const small = (headOrder: 'HND' | 'NHD'): Geometry => ({
  ...referenceGeometries['qwen3-0.6b'],
  numLayers: 2,
  numKvHeads: 4,
  headDim: 8,
  blockTokens: 4,
  headOrder,
});

describe.each(['HND', 'NHD'] as const)('the demo KV content (%s)', (headOrder) => {
  const geometry = small(headOrder);
  const hash = 0x1234_5678_9abc_def0n;

  it('is the same per head whatever the TP split: TP 1 equals the two halves of TP 2, byte for byte', () => {
    const whole = simulatedRank(geometry, 0, 1, 3);
    const halves = [simulatedRank(geometry, 0, 2, 3), simulatedRank(geometry, 1, 2, 3)];
    writeBlockContent(whole.part, whole.banks, 2, hash);
    for (const half of halves) writeBlockContent(half.part, half.banks, 1, hash);
    const element = 2;
    const rowBytes = geometry.headDim * element;
    for (let bank = 0; bank < whole.banks.length; bank++) {
      for (let head = 0; head < geometry.numKvHeads; head++) {
        for (let token = 0; token < geometry.blockTokens; token++) {
          const wholeAt =
            2 * Number(whole.part.banks[bank]?.blockStride) +
            (headOrder === 'HND' ? head * geometry.blockTokens + token : token * 4 + head) * rowBytes;
          const half = halves[head >> 1] as (typeof halves)[number];
          const local = head & 1;
          const halfAt =
            Number(half.part.banks[bank]?.blockStride) +
            (headOrder === 'HND' ? local * geometry.blockTokens + token : token * 2 + local) * rowBytes;
          const row = (whole.banks[bank] as Uint8Array).subarray(wholeAt, wholeAt + rowBytes);
          expect(row.some((byte) => byte !== 0)).toBe(true);
          expect(Buffer.compare(row, (half.banks[bank] as Uint8Array).subarray(halfAt, halfAt + rowBytes))).toBe(0);
        }
      }
    }
  });

  it('holdsBlockContent tells the block written from any other, and a single changed byte', () => {
    const rank = simulatedRank(geometry, 1, 2, 2);
    writeBlockContent(rank.part, rank.banks, 0, hash);
    expect(holdsBlockContent(rank.part, rank.banks, 0, hash)).toBe(true);
    expect(holdsBlockContent(rank.part, rank.banks, 0, hash + 1n)).toBe(false);
    expect(holdsBlockContent(rank.part, rank.banks, 1, hash)).toBe(false);
    const bank3 = rank.banks[3] as Uint8Array;
    bank3[5] = (bank3[5] as number) ^ 1;
    expect(holdsBlockContent(rank.part, rank.banks, 0, hash)).toBe(false);
  });

  it('differs between layers, planes and heads of one block', () => {
    const rank = simulatedRank(geometry, 0, 1, 1);
    writeBlockContent(rank.part, rank.banks, 0, hash);
    const pieces = rank.banks.map((bank) => Buffer.from(bank).toString('hex'));
    expect(new Set(pieces).size).toBe(pieces.length);
  });
});
