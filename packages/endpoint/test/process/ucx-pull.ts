// The pull both processes of the ucx pull test agree on: Qwen3-0.6B-shaped banks (NHD, 4 blocks of
// 16 tokens), TP 2 → 1, source blocks 3, 2, 1 pinned.
import type { Geometry } from '@kvreuse/descriptors';
import { pullTemplate } from '../loopback-pull.js';

export const geometry: Geometry = {
  numLayers: 28,
  kvPlanes: 2,
  blockTokens: 16,
  numKvHeads: 8,
  headDim: 128,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'NHD',
};
export const BLOCKS = 4;
export const PINNED_BLOCKS = Uint32Array.of(3, 2, 1);
export const ucxPull = () => pullTemplate(geometry, 2, BLOCKS);
