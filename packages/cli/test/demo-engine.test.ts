// `kvreuse demo --engine test` as a user runs it: the built binary, with the checkout's test engine as
// the decode side, a `kvreuse sidecar` serving the engine's memory, and the router fed by the engine's
// KV events; each run gets a TMPDIR of its own, which must be empty once it ends.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { EngineDemoSummary } from '../src/demo/engine-job.js';
import { runBinary, startBinary, unboundedLookup, unhurriedTransport } from './binary.js';

const anywhere = mkdtempSync(join(tmpdir(), 'kvreuse-cli-demo-engine-'));
afterAll(() => rmSync(anywhere, { recursive: true, force: true }));

/** The pids of the processes one of whose command-line arguments names a path in `folder`. */
function processesIn(folder: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
          .split('\0')
          .some((argument) => argument.includes(`${folder}/`));
      } catch {
        return false; // it ended while the list was read
      }
    })
    .map(Number);
}

describe('kvreuse demo --engine test', () => {
  it('routes turn 2 on the inventory the engine’s events fed, pulls it from the sidecar verified, and leaves nothing behind', async () => {
    const tmp = mkdtempSync(join(anywhere, 'tmp-'));
    const run = await runBinary(['demo', '--engine', 'test', '-o', 'json', ...unhurriedTransport, ...unboundedLookup], {
      cwd: anywhere,
      env: { TMPDIR: tmp },
    });
    expect(run.status, run.stderr).toBe(0);
    const summary = JSON.parse(run.stdout) as EngineDemoSummary;
    // The router's inventory of the engine is what its events said: 42 blocks of host memory, no gap.
    expect(summary.inventory).toMatchObject({ from: 'engine-events', blocks: 42, gaps: 0 });
    expect(summary.inventory.batches).toBeGreaterThanOrEqual(1);
    expect(run.stderrLines).toContainEqual(
      expect.stringMatching(
        /^turn 1: the engine holds the conversation's 42 blocks; the router's inventory indexed 42 from /,
      ),
    );
    // Its decision names the engine worker whose blocks only the events announced.
    expect(summary.decisions.map(({ request, action, reason }) => [request, action, reason])).toEqual([
      ['turn 2', 'pull', 'worth-it'],
      ['short request', 'recompute', 'too-short'],
    ]);
    expect(summary.decisions[0]!.detail).toContain(`from ${summary.engine.workerId}`);
    // The prefill pulled the whole prefix from the sidecar, every block's checksum compared.
    expect(summary.pull).toMatchObject({
      source: summary.engine.workerId,
      blocks: 42,
      checkedBlocks: 42,
      verify: 'full',
      verified: true,
      recomputedBlocks: 0,
    });
    expect(summary.drain).toEqual([expect.objectContaining({ banksReturned: 1, banksRetained: 0 })]);
    expect(summary.withdrawn).toEqual({ pinsRevoked: 0, banksReturned: 1, unmapped: true });
    expect(summary.leftBehind).toEqual({ tempFolder: null, processes: [] });
    expect(readdirSync(tmp)).toEqual([]);
  }, 180_000);

  it('killed (SIGKILL) once the engine is adopted, the demo leaves no process behind: the engine, its sidecar and the prefill each end once the parent is gone', async () => {
    const tmp = mkdtempSync(join(anywhere, 'tmp-'));
    const started = startBinary(['demo', '--engine', 'test'], { cwd: anywhere, env: { TMPDIR: tmp } });
    await started.stdoutLine(/^  test-engine-prefill-0\/tp0 ready$/);
    // The engine, the sidecar and the prefill rank each name the run's folder in their arguments.
    expect(processesIn(tmp).length).toBeGreaterThanOrEqual(3);
    started.child.kill('SIGKILL');
    await started.finished;
    await vi.waitFor(() => expect(processesIn(tmp)).toEqual([]), { timeout: 60_000, interval: 100 });
  }, 120_000);

  it('--engine with anything but test, or with the loopback backend, is a usage error: one line, exit 2', async () => {
    const other = await runBinary(['demo', '--engine', 'vllm'], { cwd: anywhere });
    expect(other.status).toBe(2);
    expect(other.stderrLines).toEqual([
      'kvreuse: demo: --engine must be test; got "vllm" (see kvreuse demo --help) [USAGE]',
    ]);
    const loopback = await runBinary(['demo', '--engine', 'test', '--backend', 'loopback'], { cwd: anywhere });
    expect(loopback.status).toBe(2);
    expect(loopback.stderrLines[0]).toContain('--engine test needs the ucx backend');
  });
});
