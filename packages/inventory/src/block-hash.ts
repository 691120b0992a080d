import { inventoryGroup } from './settings.js';
import { type Geometry, kvContentDigest } from '@kvreuse/descriptors';
import { BlockHashError } from './errors.js';

// FNV-1a 64: offset basis 0xcbf29ce484222325, prime 0x100000001b3.
const offsetBasis = 0xcbf29ce484222325n;
const prime = 0x100000001b3n;
const maxHash = (1n << 64n) - 1n;

/** FNV-1a 64 of a byte string (with BigInts: for short strings such as salts, not for blocks). */
export function fnv1a64(bytes: Uint8Array): bigint {
  let hash = offsetBasis;
  for (const byte of bytes) hash = ((hash ^ BigInt(byte)) * prime) & maxHash;
  return hash;
}

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

/** The low 32 bits of the FNV prime (its high bits are 2^40: a shift). */
const primeLow = 0x1b3;
/** Where a BigUint64Array element's low 32-bit word is in a Uint32Array view of it. */
const lowWord = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 0 : 1;

/** The state after the salt's 8 bytes, as [hi, lo]: every block's bytes start with them. */
let saltedFor = -1n;
const salted = new Int32Array(2);
function saltedState(salt: bigint): Int32Array {
  if (salt !== saltedFor) {
    const bytes = new Uint8Array(8);
    new DataView(bytes.buffer).setBigUint64(0, salt, true);
    const state = fnv1a64(bytes);
    salted[0] = Number(state >> 32n);
    salted[1] = Number(state & 0xffffffffn);
    saltedFor = salt;
  }
  return salted;
}

/**
 * The block hashes of a token sequence, as a chain: block i's hash is FNV-1a 64 over the scheme's
 * salt as 8 bytes little-endian, its parent hash (block i − 1's, or `parent` for the first block,
 * default 0) as 8 bytes little-endian, then the block's `blockTokens` token ids as 4 bytes
 * little-endian each. A partial last block is not hashed. Each block starts from its parent's hash,
 * so a chain costs its own tokens only, and nothing is allocated but the result.
 */
export function hashBlockChain(tokens: ArrayLike<number>, scheme: BlockHashScheme, parent = 0n): BigUint64Array {
  checkScheme(scheme);
  if (typeof parent !== 'bigint' || parent < 0n || parent > maxHash) {
    throw new BlockHashError('parent', parent, 'a parent hash is a bigint from 0 to 2^64 − 1');
  }
  if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number') {
    throw new BlockHashError('tokens', tokens, 'tokens are an array or typed array of token ids');
  }
  if (!Number.isSafeInteger(tokens.length) || tokens.length < 0) {
    throw new BlockHashError('tokens.length', tokens.length, 'a length is a whole number ≥ 0');
  }
  const { blockTokens } = scheme;
  const blocks = Math.floor(tokens.length / blockTokens);
  const chain = new BigUint64Array(blocks);
  const words = new Uint32Array(chain.buffer);
  const [saltedHi, saltedLo] = saltedState(scheme.salt);
  let parentHi = Number(parent >> 32n) | 0;
  let parentLo = Number(parent & 0xffffffffn) | 0;
  for (let block = 0, first = 0; block < blocks; block++, first += blockTokens) {
    let hi = saltedHi!;
    let lo = saltedLo!;
    // Words −2 and −1 are the parent's halves, then the block's tokens: 4 bytes each, low byte first.
    for (let i = -2; i < blockTokens; i++) {
      const word = i >= 0 ? tokens[first + i]! : i === -2 ? parentLo : parentHi;
      if (i >= 0 && (typeof word !== 'number' || word >>> 0 !== word)) {
        throw new BlockHashError(`tokens[${first + i}]`, word, 'a token id is a whole number from 0 to 2^32 − 1');
      }
      for (let shift = 0; shift < 32; shift += 8) {
        // state × prime mod 2^64 = state × 0x1b3 + (lo << 40): lo × 0x1b3 in 16-bit halves so that
        // everything stays in 32-bit integers, its carry added to hi × 0x1b3 + (lo << 8).
        const x = lo ^ ((word >>> shift) & 0xff);
        const lowProduct = (x & 0xffff) * primeLow;
        const highProduct = (x >>> 16) * primeLow;
        const middle = (lowProduct >>> 16) + (highProduct & 0xffff);
        hi = (Math.imul(hi, primeLow) + (highProduct >>> 16) + (middle >>> 16) + (x << 8)) | 0;
        lo = (middle << 16) | (lowProduct & 0xffff);
      }
    }
    parentHi = hi;
    parentLo = lo;
    words[2 * block + lowWord] = lo;
    words[2 * block + 1 - lowWord] = hi;
  }
  return chain;
}

const hexHash = /^[0-9a-f]{16}$/;

/** A block hash as 16 lowercase hex digits (the inventory's wire form). */
export function blockHashToHex(hash: bigint): string {
  if (typeof hash !== 'bigint' || hash < 0n || hash > maxHash) {
    throw new BlockHashError('hash', hash, 'a block hash is a bigint from 0 to 2^64 − 1');
  }
  return hash.toString(16).padStart(16, '0');
}

export function blockHashFromHex(text: string): bigint | undefined {
  return hexHash.test(text) ? BigInt(`0x${text}`) : undefined;
}
