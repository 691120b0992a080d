// `kvreuse demo` end to end, as a user runs it: the built binary starts the ranks as OS processes,
// and its `--json` summary (the last line of stdout) says what really happened.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DemoSummary } from '../src/demo/demo-summary.js';
import { runBinary } from './binary.js';

const anywhere = mkdtempSync(join(tmpdir(), 'kvreuse-cli-demo-'));
afterAll(() => rmSync(anywhere, { recursive: true, force: true }));

const lastLine = (stdout: string): string => stdout.trimEnd().split('\n').at(-1) as string;

describe('kvreuse demo', () => {
  it.each(['ucx', 'loopback'])(
    'on %s: hands turn 1 off, routes turn 2, pulls and verifies 42 blocks from both decode ranks, recomputes after a killed rank, drains every process',
    async (backend) => {
      const run = await runBinary(['demo', '--backend', backend, '--json'], { cwd: anywhere });
      expect(run.stderr).toBe('');
      expect(run.status).toBe(0);
      expect(run.stdout).toContain('turn 1: prefill computes 40 blocks and WRITEs them to both decode ranks (TP 1 → TP 2)\n');
      const summary = JSON.parse(lastLine(run.stdout)) as DemoSummary;
      // Qwen3-0.6B bf16, 64-token blocks: 28 layers × 2 planes × 8 heads × 128 × 2 bytes × 64 tokens = 7,340,032 bytes a block.
      expect(summary.pull).toMatchObject({ blocks: 42, bytes: 308_281_344, verified: true, recomputedBlocks: 0 });
      expect(summary.pull.ms).toBeGreaterThan(0);
      expect(summary.pull.gbps).toBeGreaterThan(0);
      expect(summary.handOff).toMatchObject({ blocks: 40, bytes: 40 * 7_340_032 });
      expect(summary.decisions).toEqual([
        expect.objectContaining({
          request: 'turn 2',
          action: 'fetch',
          reason: 'worth-it',
          blocks: 42,
          detail: 'pull 42 blocks from qwen3-0.6b-decode-0: saves 134.4 ms for 6.2 ms (prior estimate), net 128.2 ms',
        }),
        expect.objectContaining({
          request: 'short request',
          action: 'recompute',
          reason: 'too-short',
          detail: 'the longest retained prefix adds 2 blocks; router.minimum_transfer_prefix_blocks = 4',
        }),
      ]);
      expect(summary.gpu).toEqual({ active: false, mode: 'host-only', reason: expect.stringContaining('the native library cannot register vram') });
      expect(summary.killedRank).toEqual({
        process: 'qwen3-0.6b-decode-0/tp1',
        signal: 'SIGKILL',
        recomputed: 42,
        committedBlocks: 0,
        verified: true,
        reasons: [expect.stringMatching(/^from block 0: the read of rank pair 1 failed \(REMOTE_DISCONNECT\)/)],
      });
      const drained = { exitCode: 0, signal: null, banksReturned: 56, banksRetained: 0, pins: { waitedFor: 0, released: 0, lapsed: 0, outstanding: 0 } };
      expect(summary.drain).toEqual([
        { process: 'qwen3-0.6b-decode-0/tp0', ...drained },
        { process: 'qwen3-0.6b-decode-0/tp1', exitCode: null, signal: 'SIGKILL', banksReturned: null, banksRetained: null, pins: null },
        { process: 'qwen3-0.6b-prefill-0/tp0', ...drained },
      ]);
    },
    120_000,
  );

  it('without --json, the last line is the one-line summary', async () => {
    const run = await runBinary(['demo'], { cwd: anywhere });
    expect(run.status).toBe(0);
    expect(lastLine(run.stdout)).toMatch(
      /^kvreuse demo: pulled 42 blocks \(308,281,344 bytes, verified\) in [\d.]+ ms at [\d.]+ Gbit\/s; turn 2 fetch \(worth-it\), short request recompute \(too-short\); gpu reuse refused; killed rank: 42 blocks recomputed, 0 committed; 2 processes drained, 112 banks returned, 0 retained$/,
    );
  }, 120_000);

  it('an unknown setting flag is refused before anything starts: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--router-nope', '1'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([expect.stringMatching(/^kvreuse: 1 unknown setting name\(s\): --router-nope in argv .*\[UNKNOWN_SETTING\]$/)]);
  });

  it('a backend it does not know is a usage error: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--backend', 'rdma'], { cwd: anywhere });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual(['kvreuse: demo: --backend must be one of ucx, loopback; got "rdma" (see kvreuse demo --help) [USAGE]']);
  });
});
