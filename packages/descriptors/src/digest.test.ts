import { describe, expect, it } from 'vitest';
import { canonicalGeometry, type Geometry, geometryDigest, InvalidGeometryError, referenceGeometries } from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];

describe('geometryDigest', () => {
  it('is SHA-256 hex of the canonical form, whatever the key order', () => {
    const reversed = Object.fromEntries(Object.entries(qwen).reverse()) as Geometry;
    expect(geometryDigest(reversed)).toBe(geometryDigest(qwen));
    expect(geometryDigest(qwen)).toMatch(/^[0-9a-f]{64}$/);
    expect(canonicalGeometry(reversed)).toBe(canonicalGeometry(qwen));
  });

  it('changes with every field', () => {
    const variants: Geometry[] = [
      { ...qwen, numLayers: 29 },
      { ...qwen, kvPlanes: 1 },
      { ...qwen, blockTokens: 32 },
      { ...qwen, numKvHeads: 4 },
      { ...qwen, headDim: 64 },
      { ...qwen, dtype: 'fp16' },
      { ...qwen, bankLayout: 'fully-contiguous' },
      { ...qwen, headOrder: 'NHD' },
    ];
    const digests = new Set([qwen, ...variants].map(geometryDigest));
    expect(digests.size).toBe(variants.length + 1);
  });

  it('refuses an invalid geometry instead of digesting it', () => {
    expect(() => geometryDigest({ ...qwen, headDim: -1 })).toThrow(InvalidGeometryError);
  });
});
