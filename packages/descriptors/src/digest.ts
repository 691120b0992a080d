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
