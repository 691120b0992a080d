import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidDrainOptionError, RetriesExhaustedError } from './errors.js';
import { backoffDelay, retry } from './retry.js';

const base = { action: 'reload metadata of peer decode-0', attempts: 5, baseDelayMs: 10, maxDelayMs: 50 };

describe('backoffDelay', () => {
  it('stays within [0, min(cap, base × 2^(attempt−1)))', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 80 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, random) => {
          const delay = backoffDelay(attempt, 10, 50, () => random);
          const ceiling = Math.min(50, 10 * 2 ** (attempt - 1));
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThan(ceiling);
        },
      ),
    );
  });

  it('refuses an attempt below 1, bad delays and a missing random source', () => {
    expect(() => backoffDelay(0, 10, 50, Math.random)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'attempt' }),
    );
    expect(() => backoffDelay(1, Number.NaN, 50, Math.random)).toThrow('baseDelayMs = NaN is refused');
    expect(() => backoffDelay(1, 10, 50, undefined as never)).toThrow(expect.objectContaining({ option: 'random' }));
  });

  it('refuses a random source that draws outside [0, 1), naming what it drew', () => {
    for (const draw of [1, 2.5, -0.1, Number.NaN, '0.5'])
      expect(() => backoffDelay(2, 10, 50, () => draw as number)).toThrow(
        expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'random()', value: draw }),
      );
  });

  it('doubles the ceiling each attempt until the cap', () => {
    const top = () => 0.999999;
    expect([1, 2, 3, 4, 5].map((attempt) => backoffDelay(attempt, 10, 50, top))).toEqual([9, 19, 39, 49, 49]);
  });
});

describe('retry', () => {
  it('retries retryable failures with jittered backoff, then succeeds', async () => {
    const sleeps: number[] = [];
    let calls = 0;
    const result = await retry(
      async (attempt) => {
        calls += 1;
        if (attempt < 3) throw Object.assign(new Error('etcd unavailable'), { code: 'DISCOVERY_UNAVAILABLE' });
        return 'metadata';
      },
      {
        ...base,
        retryable: (error) => (error as { code?: string }).code === 'DISCOVERY_UNAVAILABLE',
        random: () => 0.5,
        sleep: async (ms) => void sleeps.push(ms),
      },
    );
    expect(result).toBe('metadata');
    expect(calls).toBe(3);
    expect(sleeps).toEqual([5, 10]);
  });

  it('gives up at once on an error that is not safe to retry', async () => {
    let calls = 0;
    const failure = retry(
      async () => {
        calls += 1;
        throw new Error('peer fenced');
      },
      { ...base, retryable: () => false, sleep: async () => {} },
    );
    await expect(failure).rejects.toThrow(RetriesExhaustedError);
    await expect(failure).rejects.toMatchObject({
      code: 'RETRIES_EXHAUSTED',
      attempts: 1,
      cause: { message: 'peer fenced' },
    });
    expect(calls).toBe(1);
  });

  it('stops after the last attempt and names the action', async () => {
    const failure = retry(async () => Promise.reject(new Error('busy')), {
      ...base,
      retryable: () => true,
      sleep: async () => {},
    });
    await expect(failure).rejects.toThrow('reload metadata of peer decode-0 failed after 5 attempts: busy');
  });

  it('stops when the signal aborts', async () => {
    const controller = new AbortController();
    let calls = 0;
    const failure = retry(
      async () => {
        calls += 1;
        throw new Error('pin refused');
      },
      {
        ...base,
        retryable: () => true,
        signal: controller.signal,
        sleep: async () => controller.abort(new Error('request gone')),
      },
    );
    await expect(failure).rejects.toMatchObject({ attempts: 1, cause: { message: 'request gone' } });
    expect(calls).toBe(1);
  });

  it('refuses bad options', async () => {
    await expect(retry(async () => 1, { ...base, attempts: 0, retryable: () => true })).rejects.toThrow(
      InvalidDrainOptionError,
    );
    await expect(retry(async () => 1, { ...base, maxDelayMs: -1, retryable: () => true })).rejects.toThrow(
      /maxDelayMs = -1/,
    );
    await expect(retry(async () => 1, undefined as never)).rejects.toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'options' }),
    );
    await expect(retry(async () => 1, { ...base } as never)).rejects.toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'retryable' }),
    );
    await expect(retry(async () => 1, { ...base, retryable: () => true, baseDelayMs: Number.NaN })).rejects.toThrow(
      'baseDelayMs = NaN is refused',
    );
    await expect(retry(async () => 1, { ...base, retryable: () => true, signal: {} as AbortSignal })).rejects.toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'signal' }),
    );
    await expect(retry(undefined as never, { ...base, retryable: () => true })).rejects.toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'attempt' }),
    );
  });
});
