import { describe, expect, it } from 'vitest';
import { DiscoveryKeyError } from '@kvreuse/discovery';
import { InvalidRegistryOptionError } from './errors.js';

describe('registry errors', () => {
  it('render refused values as they are: NaN, ±Infinity and bigints as themselves, nested values alike', () => {
    const refused = (value: unknown) =>
      new InvalidRegistryOptionError('timeoutMs', value, 'must be a positive number of milliseconds').message;
    expect(refused(Number.NaN)).toBe('timeoutMs = NaN is refused: must be a positive number of milliseconds');
    expect(refused(Number.POSITIVE_INFINITY)).toBe(
      'timeoutMs = Infinity is refused: must be a positive number of milliseconds',
    );
    expect(refused(Number.NEGATIVE_INFINITY)).toBe(
      'timeoutMs = -Infinity is refused: must be a positive number of milliseconds',
    );
    expect(refused(5n)).toBe('timeoutMs = 5n is refused: must be a positive number of milliseconds');
    expect(
      new InvalidRegistryOptionError('events', [{ expiresAt: Number.NaN, blocks: [1n] }], 'must be inventory events')
        .message,
    ).toBe('events = [{"expiresAt":NaN,"blocks":[1n]}] is refused: must be inventory events');
    expect(new DiscoveryKeyError('memory', Number.NaN, 'must be a string').message).toBe(
      'memory discovery: key NaN is refused: must be a string',
    );
  });
});
