import { describe, expect, it } from 'vitest';
import { warmUpRouter } from './router-warm-up.js';

/** What the warm-up did, in order: each decision of every request, and the wait for the compiler. */
async function warmUpSteps(unboundedLookup: boolean): Promise<string[]> {
  const steps: string[] = [];
  await warmUpRouter(
    unboundedLookup,
    () => steps.push('decide'),
    async () => {
      steps.push('settle');
    },
  );
  return steps;
}

describe('warmUpRouter', () => {
  it('decides every request 16 times, then lets the compiler settle', async () => {
    expect(await warmUpSteps(false)).toEqual([...Array<string>(16).fill('decide'), 'settle']);
  });

  it('under an unbounded lookup, decides nothing and does not wait for the compiler', async () => {
    expect(await warmUpSteps(true)).toEqual([]);
  });
});
