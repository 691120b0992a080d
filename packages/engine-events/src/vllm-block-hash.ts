import { createHash } from 'node:crypto';
import { type CborValue, encodeCanonicalCbor } from './canonical-cbor.js';
import { EngineEventsInputError } from './errors.js';

/** The name vLLM gives this block hash (`--prefix-caching-hash-algo sha256_cbor`). */
export const vllmBlockHashFunction = 'sha256_cbor';

/** SHA-256 of the canonical CBOR of `value`: vLLM's `sha256_cbor`. */
export function sha256Cbor(value: CborValue): Uint8Array {
  return new Uint8Array(createHash('sha256').update(encodeCanonicalCbor(value)).digest());
}

/**
 * The parent hash vLLM gives a sequence's first block (`NONE_HASH`) when `PYTHONHASHSEED` is set:
 * `sha256_cbor` of the seed as a text string. Without `PYTHONHASHSEED` vLLM draws 32 random bytes per
 * process, and no other process can compute its hashes.
 */
export function vllmNoneHash(pythonHashSeed: string): Uint8Array {
  if (typeof pythonHashSeed !== 'string')
    throw new EngineEventsInputError('pythonHashSeed', pythonHashSeed, 'the seed is the PYTHONHASHSEED string');
  return sha256Cbor(pythonHashSeed);
}

/** The extra keys of one block (LoRA name, multimodal hashes and offsets, cache salt…), or null. */
export type VllmExtraKeys = readonly CborValue[] | null;

export interface VllmHashChainOptions {
  /** Tokens per block; a partial last block is not hashed. */
  readonly blockSize: number;
  /** The first block's parent when `parent` is not given: `vllmNoneHash(seed)`. */
  readonly noneHash: Uint8Array;
  /** The hash of the block before the first one, when the tokens continue a sequence. */
  readonly parent?: Uint8Array | null;
  /** Each block's extra keys, by block index (missing entries are null). */
  readonly extraKeys?: readonly VllmExtraKeys[];
}

/**
 * vLLM's `hash_block_tokens` with `sha256_cbor`, chained over full blocks: block i's hash is
 * SHA-256 of the canonical CBOR of the array `[parent, [token ids of block i], extra keys or null]`,
 * its parent block i − 1's hash (the first block's `parent`, or `noneHash` when it has none).
 */
export function hashVllmBlockChain(tokens: ArrayLike<number>, options: VllmHashChainOptions): Uint8Array[] {
  if (options === null || typeof options !== 'object')
    throw new EngineEventsInputError('options', options, 'options are { blockSize, noneHash, parent?, extraKeys? }');
  const { blockSize, noneHash, parent = null, extraKeys = [] } = options;
  if (!Number.isSafeInteger(blockSize) || blockSize < 1)
    throw new EngineEventsInputError('blockSize', blockSize, 'tokens per block is a whole number ≥ 1');
  if (!(noneHash instanceof Uint8Array) || noneHash.length === 0)
    throw new EngineEventsInputError('noneHash', noneHash, 'the seed hash is non-empty bytes (vllmNoneHash)');
  if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number')
    throw new EngineEventsInputError('tokens', tokens, 'tokens are an array or typed array of token ids');
  if (parent !== null && !(parent instanceof Uint8Array))
    throw new EngineEventsInputError('parent', parent, "the parent is a block's hash as bytes, or null");
  if (!Array.isArray(extraKeys))
    throw new EngineEventsInputError('extraKeys', extraKeys, "extra keys are an array of each block's keys");
  extraKeys.forEach((keys: unknown, block) => {
    if (keys !== null && keys !== undefined && !Array.isArray(keys))
      throw new EngineEventsInputError(`extraKeys[${block}]`, keys, "a block's extra keys are an array, or null");
  });
  const chain: Uint8Array[] = [];
  // vLLM replaces any falsy parent (None or empty bytes) by NONE_HASH.
  let previous = parent === null || parent.length === 0 ? noneHash : parent;
  for (let block = 0; block < Math.floor(tokens.length / blockSize); block++) {
    const ids = Array.from({ length: blockSize }, (_, i) => tokens[block * blockSize + i]!);
    previous = sha256Cbor([previous, ids, extraKeys[block] ?? null]);
    chain.push(previous);
  }
  return chain;
}

/**
 * The integer form vLLM publishes a hash in when `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES` is set: the
 * digest's last 8 bytes as an unsigned big-endian integer.
 */
export function vllmIntBlockHash(digest: Uint8Array): bigint {
  if (!(digest instanceof Uint8Array) || digest.length < 8)
    throw new EngineEventsInputError('digest', digest, 'a digest is at least 8 bytes');
  return new DataView(digest.buffer, digest.byteOffset + digest.length - 8, 8).getBigUint64(0, false);
}
