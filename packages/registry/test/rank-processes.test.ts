// A worker whose ranks are separate processes, each registering its banks with a ucx agent (UCX inside
// Node, as in production), meeting in one SQLite discovery file: ready once
// every rank published; a rank killed with SIGKILL withdraws readiness when its lease expires; a
// restart with a new incarnation replaces the old parts (while an old rank still runs) and becomes
// ready without ever mixing incarnations; a graceful stop withdraws everything.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, test, vi } from 'vitest';
import { openSqliteDiscovery, watchWorkerReadiness, type WorkerReadiness } from '@kvreuse/discovery';
import { ucxTestsRun } from './helpers/ucx.js';

vi.setConfig({ testTimeout: 120_000 });

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-rank-procs-'));
const path = join(dir, 'discovery.sqlite');
const script = fileURLToPath(new URL('./processes/rank-process.ts', import.meta.url));
const children = new Set<ChildProcessWithoutNullStreams>();
const workerId = 'decode-procs';
const leaseTtlMs = 2_000;

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** Starts one rank process and resolves once it has published its part. */
function startRank(incarnation: string, tpRank: number): Promise<ChildProcessWithoutNullStreams> {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@kvreuse/source',
      '--import',
      'tsx',
      script,
      path,
      workerId,
      incarnation,
      String(tpRank),
      '2',
      String(leaseTtlMs),
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  children.add(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('published') && resolve(child));
    child.once('exit', (code) =>
      reject(new Error(`rank ${tpRank} of ${incarnation} exited ${code} before publishing: ${stderr}`)),
    );
  });
}

function stop(child: ChildProcessWithoutNullStreams, signal: 'SIGTERM' | 'SIGKILL'): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    });
    child.kill(signal);
  });
}

const summary = (readiness: WorkerReadiness): string =>
  readiness.ready ? `ready ${readiness.incarnation}` : `${readiness.reasons[0]!.kind} ${readiness.incarnation ?? '-'}`;

test.runIf(ucxTestsRun)(
  'rank processes on ucx: ready when whole, crash withdraws via lease expiry, restart replaces atomically, stop withdraws',
  async () => {
    const store = openSqliteDiscovery(path, { pollIntervalMs: 5 });
    const seen: string[] = [];
    const watch = await watchWorkerReadiness(store, workerId, {
      onChange: (readiness) => seen.push(summary(readiness)),
    });
    const last = () => seen.at(-1);
    const until = (expected: string) =>
      vi.waitFor(() => expect(last()).toBe(expected), { timeout: 60_000, interval: 20 });

    const [old0, old1] = await Promise.all([startRank('inc-1', 0), startRank('inc-1', 1)]);
    await until('ready inc-1');

    // Rank 1 crashes: nobody renews its lease, so its part expires and readiness is withdrawn.
    await stop(old1!, 'SIGKILL');
    await until('incomplete inc-1');

    // The worker restarts with a new incarnation while the old rank 0 still runs and renews its lease.
    const [new0, new1] = await Promise.all([startRank('inc-2', 0), startRank('inc-2', 1)]);
    await until('ready inc-2');
    expect(await stop(old0!, 'SIGTERM')).toBe(0);
    await watch.settled();
    expect(last()).toBe('ready inc-2');

    // A graceful stop withdraws each rank's own part at once.
    expect(await stop(new0!, 'SIGTERM')).toBe(0);
    await until('incomplete inc-2');
    expect(await stop(new1!, 'SIGTERM')).toBe(0);
    await until('no-parts -');
    await watch.close();
    await store.close();

    const readyStates = seen.filter((line) => line.startsWith('ready'));
    expect(readyStates).toEqual(['ready inc-1', 'ready inc-2']);
    // Once inc-2 appeared, inc-1 never came back.
    const firstInc2 = seen.findIndex((line) => line.includes('inc-2'));
    expect(seen.slice(firstInc2).some((line) => line.includes('inc-1'))).toBe(false);
  },
);
