import { describe, expect, it } from 'vitest';
import { DiscoveryKeyError } from '@kvreuse/discovery';
import { BankOwnerReleaseError, InvalidRegistryOptionError } from './errors.js';

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

describe('BankOwnerReleaseError', () => {
  const bank = { tpRank: 0, ppRank: 1, index: 2, address: 0x1000n, bytes: 4096n };
  const worded = 'bank 2 of rank (tp 0, pp 1) at 0x1000 (4096 bytes): handing it back to the framework failed';

  it("ends with its cause's message, and without one where the cause is not an Error", () => {
    const failed = (cause: unknown) => new BankOwnerReleaseError(bank, 'framework', { cause }).message;
    expect(failed(new Error('cudaFree returned 700'))).toBe(
      `${worded}: cudaFree returned 700; it stays releasing, retry`,
    );
    expect(failed('refused')).toBe(`${worded}; it stays releasing, retry`);
  });

  it('is made, not thrown over, for a cause whose message cannot be read', () => {
    const unreadable = new Error('hidden');
    Object.defineProperty(unreadable, 'message', {
      get() {
        throw new Error('no reading');
      },
    });
    expect(new BankOwnerReleaseError(bank, 'framework', { cause: unreadable }).message).toBe(
      `${worded}: an error whose message could not be read; it stays releasing, retry`,
    );
  });
});
