import { describe, expect, test } from 'vitest';
import { BlockHashError } from '../errors.js';
import { blockHashFromHex, blockHashToHex, fnv1a64, hashBlockChain } from './block-hash.js';

// An independent, slow reference: BigInt FNV-1a 64 over the documented byte encoding.
function referenceChain(tokens: readonly number[], blockTokens: number, parent = 0n): bigint[] {
  const mask = (1n << 64n) - 1n;
  const chain: bigint[] = [];
  for (let start = 0; start + blockTokens <= tokens.length; start += blockTokens) {
    const bytes: number[] = [];
    for (let i = 0; i < 8; i++) bytes.push(Number((parent >> BigInt(8 * i)) & 0xffn));
    for (const token of tokens.slice(start, start + blockTokens)) {
      for (let i = 0; i < 4; i++) bytes.push((token >>> (8 * i)) & 0xff);
    }
    let hash = 0xcbf29ce484222325n;
    for (const byte of bytes) hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & mask;
    chain.push(hash);
    parent = hash;
  }
  return chain;
}

describe('fnv1a64', () => {
  test('matches the published FNV-1a 64 vectors', () => {
    const ascii = (text: string) => new TextEncoder().encode(text);
    expect(fnv1a64(ascii(''))).toBe(0xcbf29ce484222325n);
    expect(fnv1a64(ascii('a'))).toBe(0xaf63dc4c8601ec8cn);
    expect(fnv1a64(ascii('foobar'))).toBe(0x85944171f73967e8n);
  });
});

describe('hashBlockChain', () => {
  test('test vectors (computed independently in Python; the README lists them)', () => {
    expect(Array.from(hashBlockChain([1, 2, 3, 4], 2), blockHashToHex)).toEqual(
      referenceChain([1, 2, 3, 4], 2).map(blockHashToHex),
    );
    expect(Array.from(hashBlockChain([1, 2, 3, 4], 2), blockHashToHex)).toEqual(['a91ab0c1027b9366', '03df829571605c60']);
    expect(Array.from(hashBlockChain([151643, 4294967295, 0, 42], 4), blockHashToHex)).toEqual(['0ee114ab54432992']);
    expect(Array.from(hashBlockChain([7], 1, 0x0123456789abcdefn), blockHashToHex)).toEqual(['eb13e80d9fac4272']);
  });

  test('equals the BigInt reference on Qwen3-sized blocks, and chains through the parent', () => {
    const tokens = Array.from({ length: 64 * 5 + 17 }, (_, i) => (i * 2654435761) % 151936);
    const chain = hashBlockChain(tokens, 64);
    expect(chain).toHaveLength(5); // the partial last block is not hashed
    expect([...chain]).toEqual(referenceChain(tokens, 64));
    // Hashing the tail from the third block's parent continues the same chain.
    expect([...hashBlockChain(tokens.slice(128), 64, chain[1])]).toEqual([...chain.slice(2)]);
    expect([...hashBlockChain(new Uint32Array(tokens), 64)]).toEqual([...chain]);
    expect(hashBlockChain(tokens.slice(0, 63), 64)).toHaveLength(0);
  });

  test('refuses what it cannot hash, naming it', () => {
    expect(() => hashBlockChain([1, 2], 0)).toThrow(BlockHashError);
    expect(() => hashBlockChain([1, -2], 2)).toThrow(expect.objectContaining({ argument: 'tokens[1]', value: -2 }));
    expect(() => hashBlockChain([1, 2 ** 32], 2)).toThrow(expect.objectContaining({ code: 'INVENTORY_INVALID_BLOCK_INPUT' }));
    expect(() => hashBlockChain([1.5, 2], 2)).toThrow(BlockHashError);
    expect(() => hashBlockChain([1, 2], 2, -1n)).toThrow(expect.objectContaining({ argument: 'parent' }));
    expect(() => hashBlockChain(null as never, 2)).toThrow(expect.objectContaining({ argument: 'tokens' }));
  });

  test('hex form round-trips and refuses anything else', () => {
    expect(blockHashFromHex(blockHashToHex(0x00ff00ff00ff00ffn))).toBe(0x00ff00ff00ff00ffn);
    expect(blockHashToHex(1n)).toBe('0000000000000001');
    expect(blockHashFromHex('ABCDEF0123456789')).toBeUndefined();
    expect(blockHashFromHex('123')).toBeUndefined();
  });
});
