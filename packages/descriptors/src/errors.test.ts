import { describe, expect, it } from 'vitest';
import { InvalidBlockListError, InvalidGeometryError, InvalidRankPartError } from './errors.js';

describe('descriptor errors', () => {
  it('render refused values as they are: NaN, ±Infinity and bigints as themselves, nested values alike', () => {
    const geometry = new InvalidGeometryError([
      { field: 'numLayers', value: Number.NaN, rule: 'must be a positive integer' },
      { field: 'headDim', value: Number.POSITIVE_INFINITY, rule: 'must be a positive integer' },
      { field: 'blockSize', value: Number.NEGATIVE_INFINITY, rule: 'must be a positive integer' },
      { field: 'numKvHeads', value: 5n, rule: 'must be a number' },
    ]);
    expect(geometry.message).toBe(
      'invalid KV geometry: numLayers = NaN: must be a positive integer; headDim = Infinity: must be a positive integer; ' +
        'blockSize = -Infinity: must be a positive integer; numKvHeads = 5n: must be a number',
    );
    expect(new InvalidBlockListError(3, [1, Number.NaN, 2n], 'must be pairs of 32-bit integers').message).toBe(
      'invalid block list at index 3: [1,NaN,2n]: must be pairs of 32-bit integers',
    );
    expect(
      new InvalidRankPartError('decode-0', { tpRank: 0, ppRank: 1 }, [
        { field: 'banks[0]', value: { bytes: Number.NaN, address: 4096n }, rule: 'must be whole' },
      ]).message,
    ).toBe(
      'invalid rank part of worker "decode-0" rank (tp 0, pp 1): banks[0] = {"bytes":NaN,"address":4096n}: must be whole',
    );
  });
});
