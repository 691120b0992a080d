import { describe, expect, it } from 'vitest';
import {
  canonicalGeometry,
  canonicalKvContent,
  type Geometry,
  geometryDigest,
  InvalidGeometryError,
  kvContentDigest,
  kvContentFields,
  referenceGeometries,
} from './index.js';

const qwen = referenceGeometries['qwen3-0.6b'];
/** One variant per fact that decides a block's KV values. */
const contentVariants: Geometry[] = [
  { ...qwen, numLayers: 29 },
  { ...qwen, kvPlanes: 1 },
  { ...qwen, blockTokens: 32 },
  { ...qwen, numKvHeads: 4 },
  { ...qwen, headDim: 64 },
  { ...qwen, dtype: 'fp16' },
];
/** One variant per fact that only places those values in memory. */
const layoutVariants: Geometry[] = [
  { ...qwen, bankLayout: 'fully-contiguous' },
  { ...qwen, headOrder: 'NHD' },
];

describe('geometryDigest', () => {
  it('is SHA-256 hex of the canonical form, whatever the key order', () => {
    const reversed = Object.fromEntries(Object.entries(qwen).reverse()) as Geometry;
    expect(geometryDigest(reversed)).toBe(geometryDigest(qwen));
    expect(geometryDigest(qwen)).toMatch(/^[0-9a-f]{64}$/);
    expect(canonicalGeometry(reversed)).toBe(canonicalGeometry(qwen));
  });

  it('changes with every field', () => {
    const variants = [...contentVariants, ...layoutVariants];
    const digests = new Set([qwen, ...variants].map(geometryDigest));
    expect(digests.size).toBe(variants.length + 1);
  });

  it('refuses an invalid geometry instead of digesting it', () => {
    expect(() => geometryDigest({ ...qwen, headDim: -1 })).toThrow(InvalidGeometryError);
  });
});

describe('kvContentDigest', () => {
  it('covers what the KV values depend on, not where they lie', () => {
    const reversed = Object.fromEntries(Object.entries(qwen).reverse()) as Geometry;
    expect(kvContentDigest(reversed)).toBe(kvContentDigest(qwen));
    expect(canonicalKvContent(qwen)).toBe(
      '["kvreuse.kv-content.v1",["numLayers",28],["kvPlanes",2],["blockTokens",64],["numKvHeads",8],["headDim",128],["dtype","bf16"]]',
    );
    expect(kvContentDigest({ ...qwen, bankLayout: 'fully-contiguous', headOrder: 'NHD' })).toBe(kvContentDigest(qwen));
    expect(kvContentFields).toEqual(['numLayers', 'kvPlanes', 'blockTokens', 'numKvHeads', 'headDim', 'dtype']);
  });

  it('changes with every KV content field, and with no layout field', () => {
    expect(new Set([qwen, ...contentVariants].map(kvContentDigest)).size).toBe(contentVariants.length + 1);
    for (const variant of layoutVariants) expect(kvContentDigest(variant)).toBe(kvContentDigest(qwen));
  });

  it('refuses an invalid geometry', () => {
    expect(() => kvContentDigest({ ...qwen, dtype: 'fp4' as never })).toThrow(InvalidGeometryError);
  });
});
