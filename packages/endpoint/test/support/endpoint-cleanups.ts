// A test file's cleanups of endpoints and agents: run after each test, newest first, once its mocks are
// restored; the test then fails if anything native is left live.
import { afterEach, expect, vi } from 'vitest';
import { transport } from './endpoint-workers.js';

/** The cleanups the file's tests push, run after each of them, which then checks nothing native is left live. */
export function cleanupsAfterEach(): (() => Promise<unknown>)[] {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    expect(transport.counters()).toMatchObject({
      liveRegistrations: 0,
      liveAllocations: 0,
      liveAgents: 0,
      liveOperations: 0,
    });
  });
  return cleanups;
}
