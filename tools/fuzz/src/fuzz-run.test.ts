import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fuzz } from './fuzz-run.js';

function failureOf(run: () => void): Error {
  try {
    run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('the target passed');
}

describe('fuzz', () => {
  it('fails the target on a failing case with a report naming the shrunk input and the seed, and the stack of the check that threw', () => {
    const failure = failureOf(() =>
      fuzz('fuzz-run failing', fc.integer({ min: 0, max: 1000 }), (count) => {
        if (count >= 10) throw new RangeError(`${count} is too many`);
      }),
    );
    // Whatever failing value the seed draws first, the report's counterexample is the least one, 10
    // (drawn as the first failure, it is shrunk 0 times).
    expect(failure.message).toContain('Counterexample: [10]');
    expect(failure.message).toMatch(/Shrunk \d+ time/);
    expect(failure.message).toMatch(/seed: -?\d+/);
    expect(failure.cause).toBeInstanceOf(RangeError);
    expect((failure.cause as Error).message).toBe('10 is too many');
    expect((failure.cause as Error).stack).toContain('fuzz-run.test.ts');
  });

  it('runs the cases without stack traces and restores the limit after a passing and a failing target', () => {
    const limit = Error.stackTraceLimit;
    const seen = new Set<number>();
    fuzz('fuzz-run passing', fc.constant(0), () => {
      seen.add(Error.stackTraceLimit);
    });
    expect([...seen]).toEqual([0]);
    expect(Error.stackTraceLimit).toBe(limit);
    failureOf(() =>
      fuzz('fuzz-run failing', fc.constant(0), () => {
        throw new Error('always');
      }),
    );
    expect(Error.stackTraceLimit).toBe(limit);
  });

  it('still fails the target when the failing case passes its replay, with the error of the run', () => {
    let calls = 0;
    const failure = failureOf(() =>
      fuzz('fuzz-run failing once', fc.nat(), () => {
        calls += 1;
        if (calls === 3) throw new Error('only the third call fails');
      }),
    );
    expect(failure.message).toContain('Counterexample:');
    expect((failure.cause as Error).message).toBe('only the third call fails');
  });
});
