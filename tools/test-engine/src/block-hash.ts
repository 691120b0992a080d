import { createHash } from 'node:crypto';
import { encode } from 'cborg';

// The engine hashes its blocks as vLLM does with sha256_cbor, through cborg (deterministic CBOR), not
// through @kvreuse/engine-events, so that a consumer's test checks its hashes against another writer's.
export function sha256Cbor(value: unknown): Uint8Array {
  return new Uint8Array(createHash('sha256').update(encode(value)).digest());
}

export function noneHash(pythonHashSeed: string): Uint8Array {
  return sha256Cbor(pythonHashSeed);
}

export function blockHash(
  parent: Uint8Array,
  tokens: readonly number[],
  extraKeys: readonly unknown[] | null,
): Uint8Array {
  return sha256Cbor([parent, tokens, extraKeys]);
}
