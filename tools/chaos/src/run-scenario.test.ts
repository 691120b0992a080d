// One run of each fault kind but `stop-over-tcp` (quarantine-run.test.ts has the one that matters), with
// the seeds that pick them, on a short prefix (the demo's 42 blocks are `pnpm chaos`'s): each run ends without a hang, and every invariant `runScenario` checks holds. Where
// the fault lands in the pull is the machine's timing; what the runs must show whatever it is, is asserted here.
import { describe, expect, it } from 'vitest';
import { chaosTransport, runScenario } from './run-scenario.js';
import { scenarioOf } from './scenario.js';

const run = (seed: number) =>
  runScenario(scenarioOf(seed, chaosTransport.abandonTimeoutMs), { blocks: 4, stepTimeoutMs: 30_000 });
const drained = (process: string) =>
  expect.stringMatching(new RegExp(`^${process} drained: 56 returned, 0 retained, 0 quarantined, `));

describe('chaos runs (real rank processes over UCX, SQLite or etcd discovery)', () => {
  it('seed 7, decode/tp1 killed: the pull ends verified or typed, the decode worker turns not ready and a second pull is refused; the others drain', async () => {
    const result = await run(7);
    expect(result.scenario).toMatchObject({ kind: 'kill-decode', victim: { role: 'decode', tpRank: 1 } });
    expect(result.evidence.slice(1)).toEqual([
      'decode not ready: missing ranks (tp 1, pp 0)',
      expect.stringMatching(/^second pull refused \(source-not-ready\)/),
      drained('chaos-decode/tp0'),
      drained('chaos-prefill/tp0'),
    ]);
  });

  it('seed 12, the prefill killed: its worker turns not ready; both decode ranks answer and drain, handing every bank back', async () => {
    const result = await run(12);
    expect(result.scenario.kind).toBe('kill-prefill');
    expect(result.evidence.slice(1)).toEqual([
      'prefill not ready: no valid rank part is published',
      drained('chaos-decode/tp0'),
      drained('chaos-decode/tp1'),
    ]);
  });

  it.each([
    [14, 'stop-rank', 'decode/tp0 stopped past the abandon timeout, then resumed'],
    [4, 'lock-sqlite', 'the SQLite write lock held'],
    [2, 'restart-etcd', 'etcd killed and restarted'],
  ])('seed %i, %s (%s): the workers are ready again and accept a second pull; all drain', async (seed, kind) => {
    const result = await run(seed);
    expect(result.scenario.kind).toBe(kind);
    expect(result.evidence.slice(1)).toEqual([
      expect.stringMatching(/^decode ready at epoch \d+/),
      expect.stringMatching(/^second pull accepted/),
      drained('chaos-decode/tp0'),
      drained('chaos-decode/tp1'),
      drained('chaos-prefill/tp0'),
    ]);
  });
});
