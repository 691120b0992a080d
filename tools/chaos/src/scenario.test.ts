import { describe, expect, it } from 'vitest';
import { describeScenario, faultKinds, faultWindowMs, scenarioOf } from './scenario.js';

const seeds = Array.from({ length: 50 }, (_, i) => i + 1);

describe('scenarioOf', () => {
  it('is the same scenario for the same seed, and the first 50 seeds strike with every fault kind', () => {
    expect(seeds.map((seed) => scenarioOf(seed, 2_000))).toEqual(seeds.map((seed) => scenarioOf(seed, 2_000)));
    expect(new Set(seeds.map((seed) => scenarioOf(seed, 2_000).kind))).toEqual(new Set(faultKinds));
    expect(describeScenario(scenarioOf(7, 2_000))).toBe('seed 7: kill-decode decode/tp1 at 92 ms');
    expect(describeScenario(scenarioOf(4, 2_000))).toBe('seed 4: lock-sqlite at 499 ms for 1275 ms');
    expect(describeScenario(scenarioOf(6, 2_000))).toBe(
      'seed 6: stop-over-tcp prefill/tp0 right after its posts for 3308 ms',
    );
    expect(describeScenario(scenarioOf(13, 2_000))).toBe('seed 13: stop-over-tcp decode/tp0 once reading for 2647 ms');
  });

  it('strikes within the pull window (a stop over tcp once the prefill reads); a stop outlasts the abandon timeout; a kill has a victim and no duration', () => {
    for (const seed of seeds) {
      const scenario = scenarioOf(seed, 2_000);
      expect(scenario.atMs).toBeGreaterThanOrEqual(0);
      expect(scenario.atMs).toBeLessThan(faultWindowMs);
      if (scenario.kind === 'stop-rank' || scenario.kind === 'stop-over-tcp')
        expect(scenario.forMs).toBeGreaterThan(2_000);
      if (scenario.kind === 'stop-over-tcp') expect(scenario.atMs).toBe(0);
      if (scenario.kind === 'kill-decode')
        expect(scenario.victim).toEqual({ role: 'decode', tpRank: expect.any(Number) });
      if (scenario.kind === 'kill-prefill') expect(scenario.victim).toEqual({ role: 'prefill', tpRank: 0 });
      if (scenario.kind.startsWith('kill-')) expect(scenario.forMs).toBe(0);
      if (scenario.kind === 'restart-etcd' || scenario.kind === 'lock-sqlite') expect(scenario.victim).toBeUndefined();
    }
  });
});
