import { describe, expect, it } from 'vitest';
import { workerFor } from '../test/support.js';
import {
  bankCount,
  deriveShard,
  elementOffset,
  type Geometry,
  InvalidBankLayoutError,
  layoutRankBanks,
  locatePiece,
  minimumBlockStride,
  pieceBytes,
  PieceOutOfRangeError,
  rankBlockBytes,
  referenceGeometries,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
const whole = { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 };

describe('byte geometry', () => {
  it('matches the reference figures for Qwen3-0.6B', () => {
    const shard = deriveShard(qwen, whole);
    expect(pieceBytes(qwen, shard)).toBe(131_072);
    expect(rankBlockBytes(qwen, shard)).toBe(7_340_032);
    expect(42 * rankBlockBytes(qwen, shard)).toBe(308_281_344);
    expect(42 * qwen.numLayers * qwen.kvPlanes).toBe(2352);
    expect(bankCount(qwen, shard)).toBe(56);
    expect(pieceBytes(qwen, deriveShard(qwen, { ...whole, tpRank: 1, tpSize: 2 }))).toBe(65_536);
  });

  it('sizes the MLA latent plane and the fully-contiguous stride', () => {
    const mla = referenceGeometries['deepseek-v3-mla'];
    const shard = deriveShard(mla, { ...whole, tpRank: 3, tpSize: 8 });
    expect(pieceBytes(mla, shard)).toBe(64 * 576 * 2);
    const contiguous: Geometry = { ...qwen, bankLayout: 'fully-contiguous' };
    expect(minimumBlockStride(contiguous, deriveShard(contiguous, whole))).toBe(7_340_032);
    expect(bankCount(contiguous, deriveShard(contiguous, whole))).toBe(1);
  });

  it('orders elements HND as [head][token][dim] and NHD as [token][head][dim]', () => {
    const geometry = { blockTokens: 64, headDim: 128, dtype: 'bf16' as const };
    expect(elementOffset({ ...geometry, headOrder: 'HND' }, 4, 1, 2, 3)).toBe(((1 * 64 + 2) * 128 + 3) * 2);
    expect(elementOffset({ ...geometry, headOrder: 'NHD' }, 4, 1, 2, 3)).toBe(((2 * 4 + 1) * 128 + 3) * 2);
  });

  it('refuses byte sizes past 2^53 − 1, naming their factors, and computes those at the edge exactly', () => {
    // 2^53 − 1 = 441650591 × 20394401 = 6361 × 69431 × 20394401, each factor below 2^31.
    const edge = {
      blockTokens: 441_650_591,
      headDim: 20_394_401,
      dtype: 'int8',
      kvPlanes: 1,
      headOrder: 'HND',
    } as const;
    const over = { ...edge, blockTokens: 2 ** 26, headDim: 2 ** 27 };
    const oneHead = { start: 0, count: 1 };
    const refusal = (field: string) =>
      expect.objectContaining({
        code: 'INVALID_GEOMETRY',
        issues: [expect.objectContaining({ field, value: 2n ** 53n })],
      });

    expect(pieceBytes(edge, { kvHeads: oneHead })).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => pieceBytes(over, { kvHeads: oneHead })).toThrow(
      refusal('blockTokens × shard.kvHeads.count × headDim × bytesPerElement(int8)'),
    );

    const shortBlock = { ...edge, blockTokens: 69_431 };
    const blockShard = (layers: number) => ({
      kvHeads: oneHead,
      layers: { start: 0, count: layers },
      kvHeadReplicas: 1,
    });
    expect(rankBlockBytes(shortBlock, blockShard(6361))).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => rankBlockBytes({ ...shortBlock, blockTokens: 1, headDim: 2 ** 27 }, blockShard(2 ** 26))).toThrow(
      refusal('blockTokens × shard.kvHeads.count × headDim × bytesPerElement(int8) × shard.layers.count × kvPlanes'),
    );

    // The last element of the largest piece, then one head more than 2^53 − 1 bytes can hold.
    expect(elementOffset(edge, 1, 0, 441_650_590, 20_394_400)).toBe(Number.MAX_SAFE_INTEGER - 1);
    expect(() => elementOffset(over, 1, 0, 0, 0)).toThrow(
      refusal('blockTokens × headCount × headDim × bytesPerElement(int8)'),
    );
  });

  it('locates pieces in layer-separate and fully-contiguous banks', () => {
    const separate = workerFor({ geometry: qwen, tpSize: 2, ppSize: 2, blocks: 8 }).ranks[3]!;
    expect(locatePiece(separate, 5, 3, 1)).toEqual({ bank: 7, offset: 5n * 65_536n });
    const contiguous = workerFor({
      geometry: { ...qwen, bankLayout: 'fully-contiguous' },
      tpSize: 2,
      ppSize: 2,
      blocks: 8,
      stridePadding: 4096,
    }).ranks[3]!;
    expect(locatePiece(contiguous, 5, 3, 1)).toEqual({
      bank: 0,
      offset: 5n * (14n * 2n * 65_536n + 4096n) + 7n * 65_536n,
    });
    expect(() => locatePiece(separate, 8, 0, 0)).toThrow(PieceOutOfRangeError);
    expect(() => locatePiece(separate, 0, 14, 0)).toThrow(/has no localLayer 14: valid values are 0 … 13/);
    expect(() => locatePiece(separate, 0, 0, 2)).toThrow(/has no plane 2/);
  });

  it('locates pieces in plane-strided banks: one bank per layer, plane p at p × planeStride', () => {
    const geometry: Geometry = { ...qwen, numLayers: 2 };
    const interleaved = workerFor({ geometry, tpSize: 2, ppSize: 1, blocks: 8, planeStride: 65_536 }).ranks[1]!;
    expect(interleaved.banks).toHaveLength(2);
    expect(locatePiece(interleaved, 5, 1, 1)).toEqual({ bank: 1, offset: 5n * 131_072n + 65_536n });
    const split = workerFor({ geometry, tpSize: 2, ppSize: 1, blocks: 8, planeStride: 8 * 65_536, blockStride: 65_536 })
      .ranks[0]!;
    expect(locatePiece(split, 5, 0, 1)).toEqual({ bank: 0, offset: 5n * 65_536n + 8n * 65_536n });
  });
});

describe('layoutRankBanks', () => {
  it('lays banks one after another from a base address, each start aligned', () => {
    const geometry: Geometry = { ...qwen, numLayers: 2 };
    const banks = layoutRankBanks(geometry, whole, {
      address: 0x10000n,
      blocks: 3,
      blockStride: 131_072 + 100,
      alignment: 2 ** 21,
    });
    expect(banks.map((bank) => bank.address)).toEqual([0x10000n, 0x200000n, 0x400000n, 0x600000n]);
    expect(banks[0]).toEqual({
      memKind: 'dram',
      deviceId: 0,
      address: 0x10000n,
      bytes: 3n * 131_172n,
      blocks: 3,
      blockStride: 131_172n,
    });
  });

  it('places banks at the given addresses', () => {
    const geometry: Geometry = { ...qwen, numLayers: 1 };
    const banks = layoutRankBanks(geometry, whole, {
      address: [0x9000_0000n, 0x1000_0000n],
      blocks: 2,
      memKind: 'vram',
      deviceId: 3,
    });
    expect(banks.map((bank) => [bank.address, bank.memKind, bank.deviceId])).toEqual([
      [0x9000_0000n, 'vram', 3],
      [0x1000_0000n, 'vram', 3],
    ]);
  });

  it('lays out plane-strided banks, one per layer, holding every plane of every block', () => {
    const geometry: Geometry = { ...qwen, numLayers: 2 };
    const interleaved = layoutRankBanks(geometry, whole, { address: 0n, blocks: 3, planeStride: 131_072 });
    expect(interleaved).toEqual(
      [0n, 786_432n].map((address) => ({
        memKind: 'dram',
        deviceId: 0,
        address,
        bytes: 786_432n,
        blocks: 3,
        blockStride: 262_144n,
        planeStride: 131_072n,
      })),
    );
    const split = layoutRankBanks(geometry, whole, {
      address: 0n,
      blocks: 3,
      blockStride: 131_072,
      planeStride: 3 * 131_072,
    });
    expect(split[0]).toMatchObject({ bytes: 786_432n, blockStride: 131_072n, planeStride: 393_216n });
    expect(() =>
      layoutRankBanks(geometry, whole, { address: 0n, blocks: 3, blockStride: 131_072, planeStride: 131_072 }),
    ).toThrow(/planeStride = 131072: the planes would overlap: plane 1 of block b overlaps plane 0 of block b \+ 1/);
    expect(() =>
      layoutRankBanks({ ...geometry, bankLayout: 'fully-contiguous' }, whole, {
        address: 0n,
        blocks: 3,
        planeStride: 131_072,
      }),
    ).toThrow(/applies to layer-separate banks only/);
    expect(() => layoutRankBanks(geometry, whole, { address: 0n, blocks: 3, planeStride: 100 })).toThrow(
      /planeStride = 100: must be an integer from 131072 to 2\^53 − 1/,
    );
  });

  it('refuses addresses that are not unsigned 64-bit bigints and layouts that pass 2^64', () => {
    const geometry: Geometry = { ...qwen, numLayers: 1 };
    const refusal = (options: Parameters<typeof layoutRankBanks>[2]) => {
      try {
        layoutRankBanks(geometry, whole, options);
      } catch (error) {
        return error instanceof InvalidBankLayoutError
          ? error.issues.map(({ field, rule }) => `${field}: ${rule}`)
          : error;
      }
      return 'accepted';
    };
    expect(refusal({ address: 2n ** 64n - 4096n, blocks: 1 })).toEqual([
      expect.stringMatching(
        /^address: bank 0 at 18446744073709547520 \(131072 bytes\) would pass the end of the 64-bit address space$/,
      ),
    ]);
    expect(refusal({ address: [0n, 2n ** 64n - 65_536n], blocks: 1 })).toEqual([
      expect.stringMatching(/^address: bank 1 at .* would pass the end of the 64-bit address space$/),
    ]);
    expect(refusal({ address: -4096n, blocks: 1 })).toEqual([
      'address: must be an unsigned 64-bit bigint, or one such bigint per bank',
    ]);
    expect(refusal({ address: 0x1000_0000 as never, blocks: 1 })).toEqual([
      'address: must be an unsigned 64-bit bigint, or one such bigint per bank',
    ]);
    expect(refusal({ address: [0n, 4096 as never], blocks: 1 })).toEqual([
      'address: must hold unsigned 64-bit bigints',
    ]);
    expect(refusal({ address: 0n, blocks: 1, memKind: 'gpu' as never, deviceId: -1 })).toEqual([
      "memKind: must be 'dram' or 'vram'",
      'deviceId: must be an integer in [0, 2^31)',
    ]);
    expect(refusal({ address: 0n, blocks: 1, alignment: 3 * 2 ** 32 })).toEqual(['alignment: must be a power of two']);
    expect(refusal(null as never)).toEqual(['options: must be { address, blocks, … }']);
    // Banks no rank part could carry: more blocks than a bank holds, or a span past 2^53 (offsets are numbers).
    expect(refusal({ address: 0n, blocks: 2 ** 31 })).toEqual(['blocks: must be a positive integer below 2^31']);
    expect(refusal({ address: 0n, blocks: 2 ** 31 - 1, blockStride: 2 ** 23 })).toEqual([
      'blocks: the banks would span 18014398501093376 bytes, which must stay below 2^53',
    ]);
  });

  it('names a bad planeStride alone, not again as the default blockStride derived from it', () => {
    for (const planeStride of ['wide', -(2 ** 20), 1.5]) {
      expect(() => layoutRankBanks(qwen, whole, { address: 0n, blocks: 1, planeStride: planeStride as never })).toThrow(
        expect.objectContaining({
          issues: [
            {
              field: 'planeStride',
              value: planeStride,
              rule: 'must be an integer from 131072 to 2^53 − 1 (one piece)',
            },
          ],
        }),
      );
    }
  });

  it('refuses a blockStride or planeStride past 2^53 − 1 at that field, not as the span of the blocks', () => {
    const refusal = (field: string, rule: string) =>
      expect.objectContaining({ code: 'INVALID_BANK_LAYOUT', issues: [{ field, value: 2 ** 60, rule }] });
    expect(() => layoutRankBanks(qwen, whole, { address: 0n, blocks: 2, blockStride: 2 ** 60 })).toThrow(
      refusal('blockStride', 'must be an integer from 131072 to 2^53 − 1'),
    );
    expect(() => layoutRankBanks(qwen, whole, { address: 0n, blocks: 2, planeStride: 2 ** 60 })).toThrow(
      refusal('planeStride', 'must be an integer from 131072 to 2^53 − 1 (one piece)'),
    );
  });

  it('rejects options that cannot make valid banks, naming each', () => {
    const attempt = () => layoutRankBanks(qwen, whole, { address: [0n], blocks: 0, blockStride: 10, alignment: 3 });
    expect(attempt).toThrow(InvalidBankLayoutError);
    expect(attempt).toThrow(
      /blocks = 0: must be a positive integer below 2\^31; blockStride = 10: must be an integer from 131072 to 2\^53 − 1; alignment = 3: must be a power of two; address = \[0n\]: must hold one address per bank \(56\)/,
    );
  });
});
