// The one run that must take the quarantine branch: seed 6, `stop-over-tcp` with the prefill as victim.
// The prefill stops itself right after posting its reads and the decode ranks are stopped behind it, so
// the branch is taken whatever the machine's timing. The demo's 42-block pull: each read (154 MB) is far
// more than the socket buffers can take while the prefill is stopped. About 20 s with its ranks' start
// and drain: the only place `npm test` reaches a quarantine with real processes.
import { describe, expect, it } from 'vitest';
import { chaosTransport, runScenario } from './run-scenario.js';
import { scenarioOf } from './scenario.js';

describe('a quarantine in a chaos run (real rank processes over UCX tcp)', () => {
  it('seed 6, the prefill stopped right after posting its reads, past the abandon timeout: its reads are quarantined with every bank retained, proven terminal later, and the pull commits nothing of them', async () => {
    const scenario = scenarioOf(6, chaosTransport.abandonTimeoutMs);
    expect(scenario).toMatchObject({ kind: 'stop-over-tcp', victim: { role: 'prefill', tpRank: 0 } });
    const result = await runScenario(scenario, { stepTimeoutMs: 30_000 });
    expect(result.outcome).toBe('recomputed');
    expect(result.evidence[0]).not.toContain('nothing was stopped');
    expect(result.quarantine).toEqual({ operations: expect.any(Number), banksRetained: 56 });
    const { operations } = result.quarantine;
    expect(operations).toBeGreaterThan(0);
    expect(result.evidence).toContain(
      `chaos-prefill/tp0 quarantined ${operations} operations (56 banks retained), ${operations} proven terminal later`,
    );
    expect(result.evidence).toContainEqual(
      expect.stringMatching(/^chaos-prefill\/tp0 drained: 56 returned, 0 retained, 0 quarantined, /),
    );
  });
});
