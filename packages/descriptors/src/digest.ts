import { createHash } from 'node:crypto';
import { type Geometry, geometryFields, parseGeometry } from './geometry.js';

/** The canonical form the digest covers: the version tag, then every field in a fixed order. */
export function canonicalGeometry(geometry: Geometry): string {
  const valid = parseGeometry(geometry);
  return JSON.stringify(['kvreuse.geometry.v1', ...geometryFields.map((field) => [field, valid[field]])]);
}

/** SHA-256 (hex) of the canonical form: equal for equal geometries whatever their key order. */
export function geometryDigest(geometry: Geometry): string {
  return createHash('sha256').update(canonicalGeometry(geometry)).digest('hex');
}

/**
 * The geometry facts that decide what a block's KV bytes mean: the same tokens give the same KV values
 * exactly when these agree. Bank layout and head order only place those values in memory.
 */
export const kvContentFields = [
  'numLayers',
  'kvPlanes',
  'blockTokens',
  'numKvHeads',
  'headDim',
  'dtype',
] as const satisfies readonly (keyof Geometry)[];

/** The canonical form `kvContentDigest` covers: its version tag, then the KV content facts in a fixed order. */
export function canonicalKvContent(geometry: Geometry): string {
  const valid = parseGeometry(geometry);
  return JSON.stringify(['kvreuse.kv-content.v1', ...kvContentFields.map((field) => [field, valid[field]])]);
}

/**
 * SHA-256 (hex) of `canonicalKvContent`: equal for two geometries whose blocks hold the same KV values
 * for the same tokens, whatever their bank layout or head order (which `geometryDigest` covers too).
 */
export function kvContentDigest(geometry: Geometry): string {
  return createHash('sha256').update(canonicalKvContent(geometry)).digest('hex');
}
