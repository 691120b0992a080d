// The vectors in ../test-data/vllm-block-hashes.json were computed independently of this package, in
// Python, from vLLM's published definition (cbor2.dumps(canonical=True) + hashlib.sha256, NONE_HASH =
// sha256_cbor(PYTHONHASHSEED)) by ../test-data/generate.py, with Debian's python3-cbor2 5.4.6 and
// python3-msgpack 1.0.3 (apt-get install python3-cbor2 python3-msgpack). The suite reads only the JSON.
import { readFileSync } from 'node:fs';
import { codeOf } from '@kvreuse/errors';
import { describe, expect, it } from 'vitest';
import { type CborValue, encodeCanonicalCbor } from './canonical-cbor.js';
import { hashVllmBlockChain, vllmIntBlockHash, vllmNoneHash } from './vllm-block-hash.js';

type Tagged = null | string | boolean | { int: string } | { bytes: string } | Tagged[];
interface Vector {
  name: string;
  tokens: number[];
  blockSize: number;
  seed: string;
  extraKeys: Tagged[] | null;
  parent: string | null;
  noneHash: string;
  hashes: string[];
  intHashes: string[];
}

const vectors = JSON.parse(
  readFileSync(new URL('../test-data/vllm-block-hashes.json', import.meta.url), 'utf8'),
) as Vector[];
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');
const untag = (value: Tagged): CborValue => {
  if (Array.isArray(value)) return value.map(untag);
  if (value !== null && typeof value === 'object')
    return 'int' in value ? BigInt(value.int) : new Uint8Array(Buffer.from(value.bytes, 'hex'));
  return value;
};

describe('vLLM sha256_cbor block hashes', () => {
  for (const vector of vectors) {
    it(`matches the Python vector: ${vector.name}`, () => {
      const noneHash = vllmNoneHash(vector.seed);
      expect(hex(noneHash)).toBe(vector.noneHash);
      const chain = hashVllmBlockChain(vector.tokens, {
        blockSize: vector.blockSize,
        noneHash,
        parent: vector.parent === null ? null : new Uint8Array(Buffer.from(vector.parent, 'hex')),
        extraKeys: (vector.extraKeys ?? []).map((keys) => (keys === null ? null : (untag(keys) as CborValue[]))),
      });
      expect(chain.map(hex)).toEqual(vector.hashes);
      expect(chain.map((digest) => vllmIntBlockHash(digest).toString())).toEqual(vector.intHashes);
    });
  }

  it('hashes only full blocks', () => {
    expect(hashVllmBlockChain([1, 2, 3, 4, 5], { blockSize: 4, noneHash: vllmNoneHash('0') })).toHaveLength(1);
  });

  it('refuses what it cannot hash with a typed error', () => {
    const noneHash = vllmNoneHash('0');
    expect(() => hashVllmBlockChain([1], { blockSize: 0, noneHash })).toThrow(/tokens per block/);
    expect(() => hashVllmBlockChain([1], { blockSize: 1, noneHash: new Uint8Array() })).toThrow(/seed hash/);
    expect(() => hashVllmBlockChain([1.5], { blockSize: 1, noneHash })).toThrow(/safe integer/);
    expect(() => encodeCanonicalCbor(1n << 64n)).toThrow(/±2\^64/);
    expect(() => encodeCanonicalCbor({} as never)).toThrow(/a CBOR value/);
    try {
      vllmIntBlockHash(new Uint8Array(4));
    } catch (error) {
      expect(codeOf(error)).toBe('ENGINE_EVENTS_INVALID_INPUT');
    }
    expect.assertions(6);
  });

  it('refuses options, a parent or extra keys of another type instead of hashing them', () => {
    const noneHash = vllmNoneHash('0');
    const refused = (argument: string) => expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument });
    expect(() => hashVllmBlockChain([1], undefined as never)).toThrow(refused('options'));
    expect(() => hashVllmBlockChain([1], { blockSize: 1, noneHash, parent: 'ab' as never })).toThrow(refused('parent'));
    expect(() => hashVllmBlockChain([1], { blockSize: 1, noneHash, parent: 7 as never })).toThrow(refused('parent'));
    expect(() => hashVllmBlockChain([1], { blockSize: 1, noneHash, extraKeys: 'ab' as never })).toThrow(
      refused('extraKeys'),
    );
    expect(() => hashVllmBlockChain([1, 2], { blockSize: 1, noneHash, extraKeys: [null, 'ab'] as never })).toThrow(
      refused('extraKeys[1]'),
    );
  });

  it('refuses an array with a hole or one that holds itself', () => {
    const refused = (path: string) => expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument: path });
    // eslint-disable-next-line no-sparse-arrays
    expect(() => encodeCanonicalCbor([, 1] as never)).toThrow(refused('value[0]'));
    const loop: CborValue[] = [1];
    loop.push(loop);
    expect(() => encodeCanonicalCbor([loop])).toThrow(refused('value[0][1]'));
    const shared = [1];
    expect(hex(encodeCanonicalCbor([shared, shared]))).toBe('8281018101');
  });

  it('writes every head in its shortest form', () => {
    const cases: [CborValue, string][] = [
      [23, '17'],
      [24, '1818'],
      [255, '18ff'],
      [256, '190100'],
      [65536, '1a00010000'],
      [2 ** 32, '1b0000000100000000'],
      [-1, '20'],
      [-25, '3818'],
      [(1n << 64n) - 1n, '1bffffffffffffffff'],
      [-(1n << 64n), '3bffffffffffffffff'],
      ['é', '62c3a9'],
      [new Uint8Array([1, 2]), '420102'],
      [[null, true, false], '83f6f5f4'],
    ];
    for (const [value, expected] of cases) expect(hex(encodeCanonicalCbor(value))).toBe(expected);
  });
});
