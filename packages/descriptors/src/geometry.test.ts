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
