// A test file's cleanups of endpoints and agents: run after each test, newest first, once the spies the
// test owned are restored; the test then fails if anything native is left live.
import { afterEach, expect, type MockInstance } from 'vitest';
import { transport } from './endpoint-workers.js';

export interface EndpointCleanups {
  /** What the test opened, undone after it, newest first. */
  readonly cleanups: (() => Promise<unknown>)[];
  /** Restores `spy` after the test, before any cleanup runs; returns it. */
  readonly own: <Spy extends MockInstance>(spy: Spy) => Spy;
}

/** The cleanups and spies of a file's tests, undone after each of them, which then checks nothing native is left live. */
export function cleanupsAfterEach(): EndpointCleanups {
  const cleanups: (() => Promise<unknown>)[] = [];
  const spies: MockInstance[] = [];
  afterEach(async () => {
    for (const spy of spies.splice(0).reverse()) spy.mockRestore();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    expect(transport.counters()).toMatchObject({
      liveRegistrations: 0,
      liveAllocations: 0,
      liveAgents: 0,
      liveOperations: 0,
    });
  });
  return {
    cleanups,
    own: (spy) => {
      spies.push(spy);
      return spy;
    },
  };
}
