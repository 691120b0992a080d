import { BlockHashError } from '../errors.js';

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

/**
 * The block hashes of a token sequence, as a chain: block i's hash is FNV-1a 64 over its parent
 * hash (block i − 1's, or `parent` for the first block, default 0) as 8 bytes little-endian,
 * followed by the block's `blockTokens` token ids as 4 bytes little-endian each. A partial last
 * block is not hashed.
 */
export function hashBlockChain(tokens: ArrayLike<number>, blockTokens: number, parent = 0n): BigUint64Array {
  if (!Number.isSafeInteger(blockTokens) || blockTokens < 1) {
    throw new BlockHashError('blockTokens', blockTokens, 'tokens per block is a whole number ≥ 1');
  }
  if (typeof parent !== 'bigint' || parent < 0n || parent > maxHash) {
    throw new BlockHashError('parent', parent, 'a parent hash is a bigint from 0 to 2^64 − 1');
  }
  if (tokens === null || typeof tokens !== 'object' || typeof tokens.length !== 'number') {
    throw new BlockHashError('tokens', tokens, 'tokens are an array or typed array of token ids');
  }
  const blocks = Math.floor(tokens.length / blockTokens);
  const chain = new BigUint64Array(blocks);
  const state = new Fnv1a64();
  let hi = Number(parent >> 32n);
  let lo = Number(parent & 0xffffffffn);
  for (let block = 0; block < blocks; block++) {
    state.hi = offsetHi;
    state.lo = offsetLo;
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
