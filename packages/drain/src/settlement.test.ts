import { describe, expect, it } from 'vitest';
import { Settlement } from './settlement.js';

describe('Settlement', () => {
  it('resolves a promise asked for before it settles with the first value only', async () => {
    const settlement = new Settlement<number>();
    const promise = settlement.promise;
    expect(settlement.promise).toBe(promise);
    expect(settlement.settle(1)).toBe(true);
    expect(settlement.settle(2)).toBe(false);
    expect(settlement.settled).toBe(true);
    expect(await promise).toBe(1);
  });

  it('gives a resolved promise of the first value when asked for after it settled, the same on every call', async () => {
    const settlement = new Settlement<string>();
    expect(settlement.settled).toBe(false);
    settlement.settle('first');
    settlement.settle('second');
    const promise = settlement.promise;
    expect(settlement.promise).toBe(promise);
    expect(await promise).toBe('first');
  });
});
