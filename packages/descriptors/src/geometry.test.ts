import { describe, expect, it } from 'vitest';
import {
  bytesPerElement,
  InvalidGeometryError,
  parseGeometry,
  referenceGeometries,
  safeParseGeometry,
} from './index.js';

describe('geometry', () => {
  it('parses every reference geometry unchanged', () => {
    for (const geometry of Object.values(referenceGeometries)) expect(parseGeometry(geometry)).toEqual(geometry);
  });

  it('names every bad field with its value and rule', () => {
    const result = safeParseGeometry({
      ...referenceGeometries['qwen3-0.6b'],
      kvPlanes: 3,
      dtype: 'fp64',
      blockTokens: 0,
      colour: 'red',
    });
    expect(result.success).toBe(false);
    if (result.success) return;
    expect(result.error).toBeInstanceOf(InvalidGeometryError);
    expect(result.error.code).toBe('INVALID_GEOMETRY');
    expect(result.error.issues.map((issue) => [issue.field, issue.value])).toEqual([
      ['kvPlanes', 3],
      ['blockTokens', 0],
      ['dtype', 'fp64'],
      ['colour', ['colour']],
    ]);
    expect(result.error.message).toMatch(/dtype = "fp64"/);
  });

  it('refuses a geometry whose block passes 2^53 − 1 bytes, naming the factors', () => {
    // 2^53 − 1 = 6361 × 69431 × 20394401, each factor below 2^31.
    const edge = {
      ...referenceGeometries['qwen3-0.6b'],
      numLayers: 6361,
      kvPlanes: 1,
      blockTokens: 69431,
      numKvHeads: 1,
      headDim: 20394401,
      dtype: 'int8',
    } as const;
    expect(parseGeometry(edge)).toEqual(edge);
    const over = { ...edge, numLayers: 2 ** 26, blockTokens: 1, headDim: 2 ** 27 };
    const result = safeParseGeometry(over);
    expect(result.success).toBe(false);
    if (result.success) return;
    expect(result.error).toBeInstanceOf(InvalidGeometryError);
    expect(result.error.message).toBe(
      'invalid KV geometry: (root) = 9007199254740992n: the bytes of a block, numLayers 67108864 × kvPlanes 1 × ' +
        'blockTokens 1 × numKvHeads 1 × headDim 134217728 × bytesPerElement(int8) 1, ' +
        'must be at most 2^53 − 1 bytes, the most a number counts exactly',
    );
  });

  it("states each field's rule in the package's own words", () => {
    const rulesOf = (input: unknown): string[] => {
      const result = safeParseGeometry(input);
      if (result.success) throw new Error('expected the geometry to be refused');
      return result.error.issues.map((issue) => `${issue.field}: ${issue.rule}`);
    };
    const qwen = referenceGeometries['qwen3-0.6b'];
    expect(
      rulesOf({ ...qwen, numLayers: 2 ** 31, blockTokens: 1.5, numKvHeads: '8', headDim: undefined, dtype: 'fp64' }),
    ).toEqual([
      'numLayers: must be a positive integer below 2^31',
      'blockTokens: must be a positive integer below 2^31',
      'numKvHeads: must be a positive integer below 2^31',
      'headDim: must be a positive integer below 2^31',
      "dtype: must be 'fp32', 'bf16', 'fp16', 'fp8_e4m3', 'fp8_e5m2' or 'int8'",
    ]);
    expect(rulesOf({ ...qwen, bankLayout: 'striped', headOrder: 1 })).toEqual([
      "bankLayout: must be 'layer-separate' or 'fully-contiguous'",
      "headOrder: must be 'NHD' or 'HND'",
    ]);
    expect(rulesOf(null)).toEqual(['(root): must be a KV geometry object']);
    expect(() => bytesPerElement('fp64' as never)).toThrow(
      "invalid KV geometry: dtype = \"fp64\": must be 'fp32', 'bf16', 'fp16', 'fp8_e4m3', 'fp8_e5m2' or 'int8'",
    );
  });

  it('throws from parseGeometry and reports a missing field', () => {
    const { headDim: _omitted, ...rest } = referenceGeometries['llama-3.1-8b'];
    expect(() => parseGeometry(rest)).toThrow(/headDim = undefined/);
    expect(() => parseGeometry('qwen')).toThrow(InvalidGeometryError);
  });

  it('knows the element size of every dtype', () => {
    expect([
      bytesPerElement('fp32'),
      bytesPerElement('bf16'),
      bytesPerElement('fp16'),
      bytesPerElement('fp8_e4m3'),
      bytesPerElement('fp8_e5m2'),
      bytesPerElement('int8'),
    ]).toEqual([4, 2, 2, 1, 1, 1]);
  });
});
