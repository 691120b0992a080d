import { inventoryGroup } from './settings.js';
import { type Geometry, kvContentDigest } from '@kvreuse/descriptors';
import { BlockHashError } from './errors.js';

// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3 = 2^40 + 0x1b3), computed on two
// uint32 halves so that hashing never allocates a BigInt per byte.
const offsetHi = 0xcbf29ce4;
const offsetLo = 0x84222325;
const primeLow = 0x1b3;
const twoTo32 = 4294967296;

class Fnv1a64 {
  hi = offsetHi;
  lo = offsetLo;

  byte(value: number): void {
    const lo = (this.lo ^ value) >>> 0;
    const low = lo * primeLow;
    this.hi = (Math.imul(this.hi, primeLow) + Math.floor(low / twoTo32) + (lo << 8)) >>> 0;
    this.lo = low >>> 0;
  }

  /** Four bytes, little-endian. */
  uint32(value: number): void {
    this.byte(value & 0xff);
    this.byte((value >>> 8) & 0xff);
    this.byte((value >>> 16) & 0xff);
    this.byte(value >>> 24);
  }

  /** Eight bytes, little-endian. */
  uint64(value: bigint): void {
    this.uint32(Number(value & 0xffffffffn));
    this.uint32(Number(value >> 32n));
  }

  get value(): bigint {
    return (BigInt(this.hi) << 32n) | BigInt(this.lo);
  }
}

/** FNV-1a 64 of a byte string. */
export function fnv1a64(bytes: Uint8Array): bigint {
  const state = new Fnv1a64();
  for (const byte of bytes) state.byte(byte);
  return state.value;
}

const maxHash = (1n << 64n) - 1n;
const hexDigest = /^[0-9a-f]{64}$/;
/**
 * The name of the block hash function this package implements (salt, chain and byte order together);
 * it changes whenever any of them does, so that a deployment profile can pin it.
 */
export const blockHashFunction = 'kvreuse.block-hash.v3';
/** Prefix of the string a salt is the hash of: the function's name. */
const saltContext = `${blockHashFunction}:`;

/**
 * A model's block salt: FNV-1a 64 over the ASCII string `kvreuse.block-hash.v3:<kvContentDigest>:<hashSeed>`
 * (the KV content digest — `kvContentDigest` of @kvreuse/descriptors — as 64 lowercase hex digits, the
 * seed as given).
 */
export function blockHashSalt(kvContentDigestHex: string, hashSeed: string): bigint {
  if (typeof kvContentDigestHex !== 'string' || !hexDigest.test(kvContentDigestHex)) {
    throw new BlockHashError(
      'kvContentDigest',
      kvContentDigestHex,
      'a KV content digest is 64 lowercase hex digits (kvContentDigest of @kvreuse/descriptors)',
    );
  }
  const seed = inventoryGroup.settings.hashSeed.schema.safeParse(hashSeed);
  if (!seed.success)
    throw new BlockHashError('hashSeed', hashSeed, `a hash seed is ${seed.error.issues[0]?.message ?? 'a string'}`);
  return fnv1a64(new TextEncoder().encode(`${saltContext}${kvContentDigestHex}:${seed.data}`));
}

/** How one model's blocks are hashed: its salt and its tokens per block. */
export interface BlockHashScheme {
  readonly salt: bigint;
  readonly blockTokens: number;
}

/**
 * The block hash scheme of a model as served: salted by the facts that decide its blocks' KV content
 * (`kvContentDigest`: layers, planes, tokens per block, KV heads, head dim, dtype) and the deployment's
 * `inventory.hash_seed`, so that models whose blocks mean different things, or of different seeds, never
 * share hashes, while workers that only lay their banks out differently (bank layout, head order) do.
 */
export function blockHashScheme(geometry: Geometry, hashSeed: string): BlockHashScheme {
  return Object.freeze({ salt: blockHashSalt(kvContentDigest(geometry), hashSeed), blockTokens: geometry.blockTokens });
}

function checkScheme(scheme: BlockHashScheme): void {
  if (scheme === null || typeof scheme !== 'object') {
    throw new BlockHashError('scheme', scheme, 'a scheme is { salt, blockTokens } (see blockHashScheme)');
  }
  if (typeof scheme.salt !== 'bigint' || scheme.salt < 0n || scheme.salt > maxHash) {
    throw new BlockHashError('scheme.salt', scheme.salt, 'a salt is a bigint from 0 to 2^64 − 1');
  }
  if (!Number.isSafeInteger(scheme.blockTokens) || scheme.blockTokens < 1) {
    throw new BlockHashError('scheme.blockTokens', scheme.blockTokens, 'tokens per block is a whole number ≥ 1');
  }
}

/**
 * The block hashes of a token sequence, as a chain: block i's hash is FNV-1a 64 over the scheme's
 * salt as 8 bytes little-endian, its parent hash (block i − 1's, or `parent` for the first block,
 * default 0) as 8 bytes little-endian, then the block's `blockTokens` token ids as 4 bytes
 * little-endian each. A partial last block is not hashed.
 */
export function hashBlockChain(tokens: ArrayLike<number>, scheme: BlockHashScheme, parent = 0n): BigUint64Array {
  checkScheme(scheme);
  if (typeof parent !== 'bigint' || parent < 0n || parent > maxHash) {
    throw new BlockHashError('parent', parent, 'a parent hash is a bigint from 0 to 2^64 − 1');
  }
  if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number') {
    throw new BlockHashError('tokens', tokens, 'tokens are an array or typed array of token ids');
  }
  const { blockTokens } = scheme;
  const blocks = Math.floor(tokens.length / blockTokens);
  const chain = new BigUint64Array(blocks);
  // Every block's bytes start with the salt: hash it once and start each block from that state.
  const state = new Fnv1a64();
  state.uint64(scheme.salt);
  const saltedHi = state.hi;
  const saltedLo = state.lo;
  let hi = Number(parent >> 32n);
  let lo = Number(parent & 0xffffffffn);
  for (let block = 0; block < blocks; block++) {
    state.hi = saltedHi;
    state.lo = saltedLo;
    state.uint32(lo);
    state.uint32(hi);
    for (let i = block * blockTokens, end = i + blockTokens; i < end; i++) {
      const token = tokens[i];
      if (typeof token !== 'number' || !Number.isInteger(token) || token < 0 || token > 0xffffffff) {
        throw new BlockHashError(`tokens[${i}]`, token, 'a token id is a whole number from 0 to 2^32 − 1');
      }
      state.uint32(token);
    }
    hi = state.hi;
    lo = state.lo;
    chain[block] = state.value;
  }
  return chain;
}

const hexHash = /^[0-9a-f]{16}$/;

/** A block hash as 16 lowercase hex digits (the inventory's wire form). */
export function blockHashToHex(hash: bigint): string {
  return hash.toString(16).padStart(16, '0');
}

export function blockHashFromHex(text: string): bigint | undefined {
  return hexHash.test(text) ? BigInt(`0x${text}`) : undefined;
}
