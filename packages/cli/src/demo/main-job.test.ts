// The main job end to end on each backend: its summary says what really happened. Its lookups are
// unbounded: the router's clock stands still, so its lookup budget never runs out whatever the machine's load.
import { exampleSettingsPath } from '../settings/example.js';
import { kvreuseSettings } from '../settings/all-settings.js';
import { loadTransport } from '@kvreuse/native-bindings';
import { describe, expect, it } from 'vitest';
import { reservePorts } from '@kvreuse-internal/test-support';
import type { DemoSummary } from './demo-summary.js';
import { runMainJob } from './main-job.js';
import type { PullReport } from './rank-messages.js';

const { settings } = kvreuseSettings.resolve({ file: exampleSettingsPath, env: {}, argv: [] });
const capabilities = loadTransport().capabilities();
/** The compute the recompute prior is derived from: 880,803,840 FLOPs a token / (2 × 2,600 MHz × 128) = 1,323.3 µs a token. */
const compute = { cores: 2, mhz: 2600 };

type Served = { request: string; decision: string; receipt: PullReport | null };

/** Turn 1 handed off 40 blocks, and turn 2 pulled and verified all 42. */
function expectHandOffAndPull(summary: DemoSummary, progress: readonly string[]): void {
  expect(progress).toContain('turn 1: prefill computes 40 blocks and WRITEs them to both decode ranks (TP 1 → TP 2)');
  // Qwen3-0.6B bf16, 64-token blocks: 28 layers × 2 planes × 8 heads × 128 × 2 bytes × 64 tokens = 7,340,032 bytes a block.
  expect(summary.pull).toMatchObject({ blocks: 42, bytes: 308_281_344, verified: true, recomputedBlocks: 0 });
  expect(summary.pull).toMatchObject({ verify: 'full', checkedBlocks: 42 });
  expect(summary.pull?.ms).toBeGreaterThan(0);
  expect(summary.pull?.gbitPerS).toBeGreaterThan(0);
  expect(summary.handOff).toMatchObject({ blocks: 40, bytes: 40 * 7_340_032 });
}

/** The router's priors: the link's from the hand-off, the recompute's derived from the compute; then its decisions: pull turn 2, recompute the short request. */
function expectPriorsAndDecisions(summary: DemoSummary, progress: readonly string[]): void {
  expect(summary.priors.blockUs).toEqual({
    value: (summary.handOff.ms * 1000) / 40,
    source: 'measured',
    detail: `turn 1's hand-off WRITEs over this link: 40 blocks in ${summary.handOff.ms.toFixed(1)} ms, one block at a time`,
  });
  expect(summary.priors.prefillTokenUs).toEqual({
    value: 880_803_840 / (2 * 2600 * 128),
    source: 'derived',
    detail:
      "Qwen3-0.6B's 880,803,840 FLOPs a token at this machine's peak: 2 cores × 2600 MHz × 128 bf16 FLOPs a cycle",
  });
  expect(progress).toContainEqual(expect.stringMatching(/^priors: a block over the link [\d,]+ µs \(measured: /));
  expect(progress).toContain(
    "  recomputing a token 1,323 µs (derived: Qwen3-0.6B's 880,803,840 FLOPs a token at this machine's peak: 2 cores × 2600 MHz × 128 bf16 FLOPs a cycle)",
  );
  expect(summary.decisions).toEqual([
    expect.objectContaining({
      request: 'turn 2',
      action: 'pull',
      reason: 'worth-it',
      blocks: 42,
      // 42 blocks × 64 tokens × 1,323.3 µs; the transfer priced at the hand-off's time a block, plus the 2 ms budget.
      detail: expect.stringMatching(
        /^pull 42 blocks from qwen3-0\.6b-decode-0: saves 3557\.\d+ ms for [\d.]+ ms \(prior estimate\), net [\d.]+ ms$/,
      ),
      costMs: expect.closeTo((summary.handOff.ms * 42) / 40 + 2, 6),
    }),
    expect.objectContaining({
      request: 'short request',
      action: 'recompute',
      reason: 'too-short',
      detail: 'the longest retained prefix adds 2 blocks; router.minimum_transfer_prefix_blocks = 4',
    }),
  ]);
}

/** The pull's receipt calibrates the router: its next estimate for these 42 blocks is what the pull took, not the hand-off's time a block. */
function expectCalibration(summary: DemoSummary, progress: readonly string[]): void {
  expect(summary.calibration?.blocks).toBe(42);
  expect(summary.calibration?.transferMs.prior).toBeCloseTo((summary.handOff.ms * 42) / 40, 6);
  expect(summary.calibration?.transferMs.measured).toBe(summary.pull?.ms);
  expect(summary.calibration?.transferMs.calibrated).toBeCloseTo(summary.pull?.ms ?? Number.NaN, 6);
  expect(summary.calibration?.decision).toMatchObject({
    request: 'turn 2, calibrated',
    blocks: 42,
    detail: expect.stringContaining('(calibrated estimate)'),
  });
  expect(progress).toContainEqual(
    expect.stringMatching(
      /^calibration: the router priced 42 blocks at [\d.]+ ms \(prior\); the pull took [\d.]+ ms; from its receipt the router now prices them at [\d.]+ ms$/,
    ),
  );
}

/** GPU reuse refused, and the pull with a killed decode rank recomputed everything. */
/** How the reader's heartbeat saw the killed rank: over ucx its process ended; on loopback (in-process) its agent went. */
const killedRankSeen = {
  ucx: 'is gone: its process ended',
  loopback: 'lost its connection: its process died or its endpoint was closed',
} as const;

function expectGpuRefusedAndKilledRank(summary: DemoSummary, backend: keyof typeof killedRankSeen): void {
  expect(summary.gpu).toEqual({
    active: false,
    mode: 'host-only',
    reason: expect.stringContaining('the native library cannot register vram'),
  });
  expect(summary.killedRank).toEqual({
    process: 'qwen3-0.6b-decode-0/tp1',
    signal: 'SIGKILL',
    recomputed: 42,
    committedBlocks: 0,
    verified: true,
    // Killed at the pin request it received: the pin is never answered, and the reader's heartbeat (not the answer
    // timeout) ends the request.
    reasons: [
      expect.stringMatching(
        new RegExp(
          `^from block 0: source rank tp1 gave no pin \\(source-unresponsive\\): source rank tp 1 pp 0 stopped answering before it answered the pin: its agent qwen3-0\\.6b-decode-0-tp1-\\S+ ${killedRankSeen[backend]}$`,
        ),
      ),
    ],
  });
}

/** Each request once, as it is served, with the prefill's receipt for the pulls. */
function expectServed(served: readonly Served[], summary: DemoSummary): void {
  expect(served).toEqual([
    { request: 'short request', decision: 'short request', receipt: null },
    {
      request: 'turn 2',
      decision: 'turn 2',
      receipt: expect.objectContaining({
        blocks: 42,
        bytes: 308_281_344,
        verified: true,
        recomputed: { blocks: 0, reasons: [] },
      }),
    },
    {
      request: 'turn 2, qwen3-0.6b-decode-0/tp1 killed',
      decision: 'turn 2',
      receipt: expect.objectContaining({
        blocks: 0,
        bytes: 0,
        verified: true,
        recomputed: { blocks: 42, reasons: summary.killedRank?.reasons },
      }),
    },
  ]);
}

/** Decode rank 0 was stopped while the prefill still held the pin it granted for the killed-rank pull: its drain waited for that pin until the prefill released it. */
function expectDrains(summary: DemoSummary, progress: readonly string[]): void {
  expect(progress).toContain(
    '  the prefill holds its pin at qwen3-0.6b-decode-0/tp0; qwen3-0.6b-decode-0/tp0 is stopped (SIGTERM) meanwhile',
  );
  expect(progress).toContain(
    '  qwen3-0.6b-decode-0/tp0 withdrew its rank part and waits for the pin; the prefill releases it',
  );
  const drained = { exitCode: 0, signal: null, banksReturned: 56, banksRetained: 0 };
  const heldPin = { reader: expect.stringMatching(/^qwen3-0\.6b-prefill-0-tp0-/), blocks: 42, ended: 'released' };
  expect(summary.drain).toEqual([
    {
      process: 'qwen3-0.6b-decode-0/tp0',
      ...drained,
      pins: { waitedFor: 1, released: 1, lapsed: 0, outstanding: 0, held: [heldPin] },
    },
    {
      process: 'qwen3-0.6b-decode-0/tp1',
      exitCode: null,
      signal: 'SIGKILL',
      banksReturned: null,
      banksRetained: null,
      pins: null,
    },
    {
      process: 'qwen3-0.6b-prefill-0/tp0',
      ...drained,
      pins: { waitedFor: 0, released: 0, lapsed: 0, outstanding: 0, held: [] },
    },
  ]);
  expect(progress).toContainEqual(
    expect.stringMatching(
      /^ {2}qwen3-0\.6b-decode-0\/tp0: 56 banks returned, 0 retained, 1 pin waited for: qwen3-0\.6b-prefill-0-tp0-\S+'s pin of 42 blocks, released$/,
    ),
  );
}

describe('the main job', () => {
  it.each(['ucx', 'loopback'] as const)(
    'on %s: hands turn 1 off, routes turn 2, pulls and verifies 42 blocks from both decode ranks, recomputes after a killed rank, drains every process',
    async (backend) => {
      const progress: string[] = [];
      const served: Served[] = [];
      const summary = await runMainJob({
        settings,
        capabilities,
        backend,
        progress: (line) => progress.push(line),
        requestServed: (request, decision, receipt) => served.push({ request, decision: decision.request, receipt }),
        unboundedLookup: true,
        compute,
      });
      expectHandOffAndPull(summary, progress);
      expectPriorsAndDecisions(summary, progress);
      expectCalibration(summary, progress);
      expectGpuRefusedAndKilledRank(summary, backend);
      expectServed(served, summary);
      expectDrains(summary, progress);
    },
    120_000,
  );

  it('on loopback, with --endpoint-verify sampled and --endpoint-metrics-port: the pull compares every 8th block and the last, and each rank prints where it serves its metrics', async () => {
    const first = await reservePorts(4);
    const sampled = kvreuseSettings.resolve({
      file: exampleSettingsPath,
      env: {},
      argv: ['--endpoint-verify', 'sampled', '--endpoint-metrics-port', String(first)],
    }).settings;
    const progress: string[] = [];
    const served: (PullReport | null)[] = [];
    const summary = await runMainJob({
      settings: sampled,
      capabilities,
      backend: 'loopback',
      progress: (line) => progress.push(line),
      requestServed: (_request, _decision, receipt) => served.push(receipt),
      unboundedLookup: true,
    });
    // Blocks 0, 8, 16, 24, 32, 40 and 41 of 42.
    expect(summary.pull).toMatchObject({ blocks: 42, verified: true, verify: 'sampled', checkedBlocks: 7 });
    expect(served[1]).toMatchObject({ verify: 'sampled', checkedBlocks: 7 });
    expect(progress).toContain(
      'pull: qwen3-0.6b-prefill-0 pulls 42 blocks from both decode ranks (TP 2 → TP 1), checksums verified: sampled (endpoint.verify)',
    );
    expect(progress).toContainEqual(
      expect.stringMatching(
        /^ {2}42 blocks, 308,281,344 bytes, 7 blocks' checksums compared \(sampled\), every byte verified, /,
      ),
    );
    // The ranks start at once: each prints its URL when it has published, in whatever order they do; the router (this process) serves on the port after theirs.
    expect(progress.filter((line) => line.includes('serves its metrics at')).sort()).toEqual([
      `  qwen3-0.6b-decode-0/tp0 serves its metrics at http://127.0.0.1:${first}/metrics`,
      `  qwen3-0.6b-decode-0/tp1 serves its metrics at http://127.0.0.1:${first + 1}/metrics`,
      `  qwen3-0.6b-prefill-0/tp0 serves its metrics at http://127.0.0.1:${first + 2}/metrics`,
      `  the router (this process) serves its metrics at http://127.0.0.1:${first + 3}/metrics`,
    ]);
  }, 60_000);
});
