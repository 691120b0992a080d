import { inventoryGroup } from './settings.js';
import { type Geometry, InvalidGeometryError, kvContentDigest, referenceGeometries } from '@kvreuse/descriptors';
import { describe, expect, test } from 'vitest';
import { BlockHashError } from './errors.js';
import {
  blockHashFromHex,
  blockHashFunction,
  blockHashSalt,
  blockHashScheme,
  blockHashToHex,
  fnv1a64,
  hashBlockChain,
} from './block-hash.js';

const mask = (1n << 64n) - 1n;
const fnvReference = (bytes: readonly number[]): bigint => {
  let hash = 0xcbf29ce484222325n;
  for (const byte of bytes) hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & mask;
  return hash;
};
const littleEndian = (value: bigint, bytes: number): number[] =>
  Array.from({ length: bytes }, (_, i) => Number((value >> BigInt(8 * i)) & 0xffn));

// An independent, slow reference: BigInt FNV-1a 64 over the documented byte encoding.
function referenceChain(tokens: readonly number[], salt: bigint, blockTokens: number, parent = 0n): bigint[] {
  const chain: bigint[] = [];
  for (let start = 0; start + blockTokens <= tokens.length; start += blockTokens) {
    const bytes = [...littleEndian(salt, 8), ...littleEndian(parent, 8)];
    for (const token of tokens.slice(start, start + blockTokens)) bytes.push(...littleEndian(BigInt(token), 4));
    parent = fnvReference(bytes);
    chain.push(parent);
  }
  return chain;
}

const qwen = referenceGeometries['qwen3-0.6b'];
const qwenDigest = '28a6b7b5aa166631e515428e407f5f9e60283548ddb9dd4f084dfda21621fe3a';
const hex = (chain: BigUint64Array) => Array.from(chain, blockHashToHex);

describe('fnv1a64', () => {
  test('matches the published FNV-1a 64 vectors', () => {
    const ascii = (text: string) => new TextEncoder().encode(text);
    expect(fnv1a64(ascii(''))).toBe(0xcbf29ce484222325n);
    expect(fnv1a64(ascii('a'))).toBe(0xaf63dc4c8601ec8cn);
    expect(fnv1a64(ascii('foobar'))).toBe(0x85944171f73967e8n);
  });
});

describe('blockHashSalt and blockHashScheme', () => {
  test('test vectors (computed independently in Python; the README lists them)', () => {
    expect(kvContentDigest(qwen)).toBe(qwenDigest);
    expect(blockHashToHex(blockHashSalt(qwenDigest, ''))).toBe('5e30afe2094fcff1');
    expect(blockHashToHex(blockHashSalt(qwenDigest, 'qwen3-0.6b@main'))).toBe('e3dcdee2c488b585');
    expect(blockHashSalt(qwenDigest, 'qwen3-0.6b@main')).toBe(
      fnvReference([...new TextEncoder().encode(`kvreuse.block-hash.v3:${qwenDigest}:qwen3-0.6b@main`)]),
    );
    expect(blockHashScheme(qwen, 'qwen3-0.6b@main')).toEqual({ salt: 0xe3dcdee2c488b585n, blockTokens: 64 });
  });

  test('blockHashFunction names the function these vectors pin', () => {
    expect(blockHashFunction).toBe('kvreuse.block-hash.v3');
  });

  test('two models never share a salt: another geometry or another seed gives another one', () => {
    const salts = new Set<bigint>();
    for (const geometry of Object.values(referenceGeometries)) {
      for (const seed of ['', 'a', 'b', 'model@rev-1', 'model@rev-2']) salts.add(blockHashScheme(geometry, seed).salt);
    }
    expect(salts.size).toBe(Object.keys(referenceGeometries).length * 5);
    const tokens = Array.from({ length: 64 }, (_, i) => i);
    const llama = referenceGeometries['llama-3.1-8b'];
    // Qwen3-0.6B and Llama-3.1-8B differ only in their layer count; their blocks still never collide.
    expect(hashBlockChain(tokens, blockHashScheme(qwen, ''))[0]).not.toBe(
      hashBlockChain(tokens, blockHashScheme(llama, ''))[0],
    );
  });

  test('workers that only lay their banks out differently share hashes; workers whose blocks mean different things do not', () => {
    const tokens = Array.from({ length: 64 * 3 }, (_, i) => (i * 2654435761) % 151936);
    const chainOf = (geometry: Geometry) => [...hashBlockChain(tokens, blockHashScheme(geometry, 'qwen3-0.6b@main'))];
    const reference = chainOf(qwen);
    // checkCompatibility accepts another bank layout: a fully-contiguous source serves a layer-separate destination.
    expect(chainOf({ ...qwen, bankLayout: 'fully-contiguous' })).toEqual(reference);
    // Another head order holds the same values: the router finds such a source and names why it cannot
    // serve (checkCompatibility's HEAD_ORDER_MISMATCH) instead of never finding it.
    expect(chainOf({ ...qwen, headOrder: 'NHD' })).toEqual(reference);
    for (const other of [
      { ...qwen, dtype: 'fp16' },
      { ...qwen, headDim: 64 },
      { ...qwen, numLayers: 29 },
      { ...qwen, numKvHeads: 4 },
      { ...qwen, kvPlanes: 1 },
    ] satisfies Geometry[]) {
      const chain = chainOf(other);
      for (let i = 0; i < reference.length; i++) expect(chain[i]).not.toBe(reference[i]);
    }
  });

  test('refuses a digest or seed it cannot salt with, naming it', () => {
    expect(() => blockHashSalt(qwenDigest.toUpperCase(), '')).toThrow(
      expect.objectContaining({ argument: 'kvContentDigest' }),
    );
    expect(() => blockHashSalt(qwenDigest, 'with space')).toThrow(
      expect.objectContaining({ code: 'INVENTORY_INVALID_BLOCK_INPUT', argument: 'hashSeed', value: 'with space' }),
    );
    expect(() => blockHashSalt(qwenDigest, 'é')).toThrow(BlockHashError);
    expect(() => blockHashSalt(qwenDigest, 'x'.repeat(129))).toThrow(BlockHashError);
    expect(() => blockHashSalt(qwenDigest, 7 as never)).toThrow(expect.objectContaining({ argument: 'hashSeed' }));
    expect(() => blockHashScheme({ ...qwen, blockTokens: 0 }, '')).toThrow(InvalidGeometryError);
    // The seed's rule is the configuration setting's own.
    expect(inventoryGroup.settings.hashSeed.schema.safeParse('x'.repeat(128)).success).toBe(true);
    expect(blockHashSalt(qwenDigest, 'x'.repeat(128))).toBeTypeOf('bigint');
  });
});

describe('hashBlockChain', () => {
  const salt = 0x5e30afe2094fcff1n; // Qwen3-0.6B's salt with the default (empty) seed

  test('test vectors (computed independently in Python; the README lists them)', () => {
    expect(hex(hashBlockChain([1, 2, 3, 4], { salt, blockTokens: 2 }))).toEqual(
      referenceChain([1, 2, 3, 4], salt, 2).map(blockHashToHex),
    );
    expect(hex(hashBlockChain([1, 2, 3, 4], { salt, blockTokens: 2 }))).toEqual([
      '7ca7d2167c1ae47b',
      '60e99242405056a9',
    ]);
    expect(hex(hashBlockChain([151643, 4294967295, 0, 42], { salt, blockTokens: 4 }))).toEqual(['829ff4198fdeeb17']);
    expect(hex(hashBlockChain([7], { salt, blockTokens: 1 }, 0x0123456789abcdefn))).toEqual(['ba56802877525daf']);
    const tokens = Array.from({ length: 128 }, (_, i) => i);
    expect(hex(hashBlockChain(tokens, blockHashScheme(qwen, '')))).toEqual(['9e098063efecbc38', '0ebfbf79606f33a9']);
    expect(hex(hashBlockChain(tokens, blockHashScheme(qwen, 'qwen3-0.6b@main')))).toEqual([
      'fb452d125f988746',
      '3e61b1d7b3441abd',
    ]);
  });

  test('equals the BigInt reference on Qwen3-sized blocks, and chains through the parent', () => {
    const scheme = blockHashScheme(qwen, 'qwen3-0.6b@main');
    const tokens = Array.from({ length: 64 * 5 + 17 }, (_, i) => (i * 2654435761) % 151936);
    const chain = hashBlockChain(tokens, scheme);
    expect(chain).toHaveLength(5); // the partial last block is not hashed
    expect([...chain]).toEqual(referenceChain(tokens, scheme.salt, 64));
    // Hashing the tail from the third block's parent continues the same chain.
    expect([...hashBlockChain(tokens.slice(128), scheme, chain[1])]).toEqual([...chain.slice(2)]);
    expect([...hashBlockChain(new Uint32Array(tokens), scheme)]).toEqual([...chain]);
    expect(hashBlockChain(tokens.slice(0, 63), scheme)).toHaveLength(0);
  });

  test('equals the BigInt reference for parents above 2^63, token ids up to 2^32 − 1 and salts taken in turn', () => {
    let state = 0x2545f491;
    const random32 = (): number => {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      return state >>> 0;
    };
    const salts = [salt, 0xffffffffffffffffn, 0n, 0x8000000000000001n];
    for (let round = 0; round < 40; round++) {
      const scheme = { salt: salts[round % salts.length]!, blockTokens: 1 + (round % 7) };
      const parent = (BigInt((random32() | 0x80000000) >>> 0) << 32n) | BigInt(random32());
      const tokens = Array.from({ length: 3 * scheme.blockTokens }, (_, i) => (i % 5 === 0 ? 0xffffffff : random32()));
      expect([...hashBlockChain(tokens, scheme, parent)]).toEqual(
        referenceChain(tokens, scheme.salt, scheme.blockTokens, parent),
      );
    }
  });

  test('refuses what it cannot hash, naming it', () => {
    const scheme = { salt, blockTokens: 2 };
    expect(() => hashBlockChain([1, 2], { salt, blockTokens: 0 })).toThrow(
      expect.objectContaining({ argument: 'scheme.blockTokens' }),
    );
    expect(() => hashBlockChain([1, 2], { salt: -1n, blockTokens: 2 })).toThrow(
      expect.objectContaining({ argument: 'scheme.salt' }),
    );
    expect(() => hashBlockChain([1, 2], 2 as never)).toThrow(expect.objectContaining({ argument: 'scheme' }));
    expect(() => hashBlockChain([1, -2], scheme)).toThrow(
      expect.objectContaining({ argument: 'tokens[1]', value: -2 }),
    );
    expect(() => hashBlockChain([1, 2 ** 32], scheme)).toThrow(
      expect.objectContaining({ code: 'INVENTORY_INVALID_BLOCK_INPUT' }),
    );
    expect(() => hashBlockChain([1.5, 2], scheme)).toThrow(BlockHashError);
    // Token ids as bigints (a BigUint64Array of them, say) are no numbers: refused, not a raw TypeError.
    expect(() => hashBlockChain(BigUint64Array.of(1n, 2n) as never, scheme)).toThrow(
      expect.objectContaining({ code: 'INVENTORY_INVALID_BLOCK_INPUT', argument: 'tokens[0]', value: 1n }),
    );
    expect(() => hashBlockChain([1, Symbol('2')] as never, scheme)).toThrow(
      expect.objectContaining({ argument: 'tokens[1]' }),
    );
    expect(() => hashBlockChain([1, 2], scheme, -1n)).toThrow(expect.objectContaining({ argument: 'parent' }));
    expect(() => hashBlockChain(null as never, scheme)).toThrow(expect.objectContaining({ argument: 'tokens' }));
  });

  test('refuses tokens whose length is not a whole number ≥ 0', () => {
    const scheme = { salt: 1n, blockTokens: 2 };
    for (const length of [Number.NaN, -4, Number.POSITIVE_INFINITY, 2.5]) {
      expect(() => hashBlockChain({ length } as never, scheme), String(length)).toThrow(
        expect.objectContaining({ code: 'INVENTORY_INVALID_BLOCK_INPUT', argument: 'tokens.length' }),
      );
    }
  });

  test('hex form round-trips and refuses anything else', () => {
    expect(blockHashFromHex(blockHashToHex(0x00ff00ff00ff00ffn))).toBe(0x00ff00ff00ff00ffn);
    expect(blockHashToHex(1n)).toBe('0000000000000001');
    expect(blockHashFromHex('ABCDEF0123456789')).toBeUndefined();
    expect(blockHashFromHex('123')).toBeUndefined();
    for (const hash of [-1n, 1n << 64n, 1]) {
      expect(() => blockHashToHex(hash as never), String(hash)).toThrow(
        expect.objectContaining({ code: 'INVENTORY_INVALID_BLOCK_INPUT', argument: 'hash' }),
      );
    }
  });
});
