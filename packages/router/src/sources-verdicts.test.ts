import { checkCompatibility } from '@kvreuse/descriptors';
import { describe, expect, it, vi } from 'vitest';
import { readyOf, workerOf } from '../test/support.js';
import { SourceBook } from './sources.js';

vi.mock('@kvreuse/descriptors', async (importOriginal) => {
  const actual = await importOriginal<typeof import('@kvreuse/descriptors')>();
  return { ...actual, checkCompatibility: vi.fn(actual.checkCompatibility) };
});

describe('SourceBook compatibility verdicts', () => {
  it('keeps the verdicts of destinations asked about lately, however often other destinations restart', () => {
    const book = new SourceBook();
    book.observe(readyOf(workerOf('decode-1'), 1));
    const source = book.get('decode-1')!;
    const live = workerOf('prefill-0', { role: 'prefill' });
    const checks = vi.mocked(checkCompatibility);
    const checked = (destination: ReturnType<typeof workerOf>): number => {
      checks.mockClear();
      book.incompatibility(source, destination);
      return checks.mock.calls.length;
    };
    expect(checked(live)).toBe(1);
    const first = workerOf('prefill-1', { role: 'prefill', incarnation: 'prefill-1-0' });
    expect(checked(first)).toBe(1);
    for (let restart = 1; restart <= 1000; restart++) {
      checked(workerOf('prefill-1', { role: 'prefill', incarnation: `prefill-1-${restart}` }));
      if (restart % 100 === 0) expect(checked(live)).toBe(0);
    }
    // The first incarnation's verdict was let go: asked again, it is checked again.
    expect(checked(first)).toBe(1);
  });
});
