// `kvreuse demo` with GPU reuse admitted, over the fake CUDA driver of native/test/fake_cuda (host memory
// behind the driver's entry points, built here with make; the binary's library loads it through
// KVT_CUDA_LIBRARY). It tests the demo's layer above the driver — vram banks, their content copied up,
// the pull between them by the IPC path and its checksums by the kernel's code, the drains — never a GPU
// (tools/gpu-check runs the same command on one).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { DemoSummary } from '../src/demo/demo-summary.js';
import { repoRoot, runBinary, unboundedLookup, unhurriedTransport } from './binary.js';

const nativeDir = join(repoRoot, 'native');
const fakeDriver = join(nativeDir, 'build/fake_cuda/libcuda.so.1');
const anywhere = mkdtempSync(join(tmpdir(), 'kvreuse-cli-demo-vram-'));
afterAll(() => rmSync(anywhere, { recursive: true, force: true }));

const admitting = ['--profile-name', 'qwen3-0.6b-bf16-b64', '--router-enable-decode-to-prefill-gpu-reuse'];

/** The demo's rank processes still running whose options name `tmp` (their SQLite file is there). */
const rankProcessesIn = (tmp: string): number[] =>
  readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${tmp}/`);
      } catch {
        return false; // it ended while the list was read
      }
    })
    .map(Number);

/** `kvreuse demo -o json` with GPU reuse asked for, over the fake driver with `devices` GPUs, in a TMPDIR of its own. */
async function demoOverFakeDriver(devices: number): Promise<{ summary: DemoSummary; stderr: readonly string[] }> {
  execFileSync('make', ['-s', '-C', nativeDir, 'build/fake_cuda/libcuda.so.1'], { stdio: 'inherit' });
  const tmp = mkdtempSync(join(anywhere, 'tmp-'));
  const run = await runBinary(['demo', '-o', 'json', ...admitting, ...unhurriedTransport, ...unboundedLookup], {
    cwd: anywhere,
    env: { TMPDIR: tmp, KVT_CUDA_LIBRARY: fakeDriver, FAKE_CUDA_DEVICES: String(devices) },
  });
  expect(run.status, run.stderr).toBe(0);
  // Nothing is left behind: no rank process, no file.
  expect(rankProcessesIn(tmp)).toEqual([]);
  expect(readdirSync(tmp)).toEqual([]);
  return { summary: JSON.parse(run.stdout) as DemoSummary, stderr: run.stderrLines };
}

describe('kvreuse demo with GPU reuse admitted, over the fake CUDA driver', () => {
  it('puts every bank in vram: gpu reuse active, the 42-block pull between vram banks verified, the killed rank, every process drained', async () => {
    const { summary, stderr } = await demoOverFakeDriver(1);
    expect(stderr).toContainEqual(expect.stringMatching(/ as OS processes \(ucx, .*, banks in GPU 0's memory\)$/));
    expect(stderr).toContain('gpu reuse: active');
    expect(summary.gpu).toEqual({ active: true, mode: 'gpu', reason: '' });
    expect(summary.pull).toMatchObject({
      memory: 'vram',
      blocks: 42,
      bytes: 308_281_344,
      verified: true,
      verify: 'full',
      checkedBlocks: 42,
      recomputedBlocks: 0,
    });
    expect(summary.killedRank).toMatchObject({ process: 'qwen3-0.6b-decode-0/tp1', signal: 'SIGKILL', verified: true });
    expect(
      summary.drain.map(({ process, banksReturned, banksRetained }) => [process, banksReturned, banksRetained]),
    ).toEqual([
      ['qwen3-0.6b-decode-0/tp0', 56, 0],
      ['qwen3-0.6b-decode-0/tp1', null, null],
      ['qwen3-0.6b-prefill-0/tp0', 56, 0],
    ]);
  }, 60_000);

  it('without a device says why GPU reuse is refused and runs on host memory', async () => {
    const { summary, stderr } = await demoOverFakeDriver(0);
    expect(summary.gpu).toMatchObject({ active: false, mode: 'host-only' });
    expect(summary.gpu.reason).toContain('the native library cannot register vram: no: no device');
    expect(stderr).toContain(`gpu reuse: refused (host-only): ${summary.gpu.reason}`);
    expect(summary.pull).toMatchObject({ memory: 'dram', blocks: 42, verified: true });
  }, 60_000);
});
