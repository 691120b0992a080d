// The start-up stress (test/startup/stress.ts) in a bounded form: 4 Node processes × 5 cycles of agent
// create → allocate → register → load a peer → read → close on ucx, while another such process at a
// time is SIGKILLed at random. The full 4 × 250 run is done by hand (see docs/testing.md).
import { describe, expect, it } from 'vitest';
import { ucxTestsRun } from './support/backends.js';
import { runStartupStress } from './startup/stress.js';

describe.runIf(ucxTestsRun)('start-up stress on ucx, in the configuration users run', () => {
  it('4 processes × 5 cycles with processes killed alongside: no crash, no hang', async () => {
    const outcome = await runStartupStress({ workers: 4, cycles: 5, victims: 1 });
    expect(outcome.crashes).toEqual([]);
    expect(outcome.workerCycles).toBe(20);
    expect(outcome.victimsKilled).toBeGreaterThanOrEqual(1);
  }, 600_000);
});
