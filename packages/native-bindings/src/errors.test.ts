import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, LibraryMismatchError } from './errors.js';

describe('facade errors', () => {
  it('render the refused value as it is: NaN, ±Infinity and bigints as themselves, nested values alike', () => {
    expect(new InvalidArgumentError('nth', Number.NaN, 'must be an integer ≥ 1').message).toBe(
      'nth = NaN: must be an integer ≥ 1',
    );
    expect(new InvalidArgumentError('ms', Number.POSITIVE_INFINITY, 'must be an integer').message).toBe(
      'ms = Infinity: must be an integer',
    );
    expect(new InvalidArgumentError('bytes', Number.NEGATIVE_INFINITY, 'must be positive').message).toBe(
      'bytes = -Infinity: must be positive',
    );
    expect(new InvalidArgumentError('address', 5n, 'must be aligned').message).toBe('address = 5n: must be aligned');
    expect(
      new InvalidArgumentError('range', { address: 5n, bytes: Number.NaN }, 'must be a memory range').message,
    ).toBe('range = {"address":5n,"bytes":NaN}: must be a memory range');
    expect(new InvalidArgumentError('view', new Uint8Array(16), 'must be writable').message).toBe(
      'view = Uint8Array(16 bytes): must be writable',
    );
    expect(new LibraryMismatchError('/lib/x.so', 'the API version', [1, 2], Number.NaN).message).toBe(
      '"/lib/x.so": the API version is NaN, this facade needs [1,2]',
    );
  });
});
