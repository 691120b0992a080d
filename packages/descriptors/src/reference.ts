import type { Geometry } from './geometry.js';

/**
 * Real model geometries for tests, examples and benchmarks, all bf16 with 64-token blocks, layer-separate
 * banks and HND pieces. Qwen3-0.6B is the faithful reference: 131,072 bytes per (block, layer, plane),
 * 7,340,032 bytes per block.
 */
export const referenceGeometries = {
  'qwen3-0.6b': {
    numLayers: 28,
    kvPlanes: 2,
    blockTokens: 64,
    numKvHeads: 8,
    headDim: 128,
    dtype: 'bf16',
    bankLayout: 'layer-separate',
    headOrder: 'HND',
  },
  'llama-3.1-8b': {
    numLayers: 32,
    kvPlanes: 2,
    blockTokens: 64,
    numKvHeads: 8,
    headDim: 128,
    dtype: 'bf16',
    bankLayout: 'layer-separate',
    headOrder: 'HND',
  },
  'llama-3.1-70b': {
    numLayers: 80,
    kvPlanes: 2,
    blockTokens: 64,
    numKvHeads: 8,
    headDim: 128,
    dtype: 'bf16',
    bankLayout: 'layer-separate',
    headOrder: 'HND',
  },
  /** DeepSeek-V3 MLA: one latent plane of 512 + 64 (RoPE) elements per token, replicated on every TP rank. */
  'deepseek-v3-mla': {
    numLayers: 61,
    kvPlanes: 1,
    blockTokens: 64,
    numKvHeads: 1,
    headDim: 576,
    dtype: 'bf16',
    bankLayout: 'layer-separate',
    headOrder: 'HND',
  },
} as const satisfies Record<string, Geometry>;

export type ReferenceModel = keyof typeof referenceGeometries;
