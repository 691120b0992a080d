// The stalled-incarnation scenario with real OS processes, on a shared SQLite file and on a real
// etcd: a decode process publishes inc-1 under a 1.5 s lease and is stopped (SIGSTOP) until its
// lease has lapsed (the deletion observed, not a sleep); its replacement publishes inc-2; the old
// process is continued. Readiness must end with inc-2 ready, inc-1 never ready again, and the old
// process must say it was superseded and write nothing more.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test, vi } from 'vitest';
import {
  connectEtcdDiscovery,
  type DiscoveryStore,
  openSqliteDiscovery,
  watchWorkerReadiness,
  type WorkerReadiness,
} from '@kvreuse/discovery';
import { etcdRuns, EtcdServer, stopProcess } from '@kvreuse-internal/test-support';

vi.setConfig({ testTimeout: 120_000 });

const script = fileURLToPath(new URL('./processes/incarnation-process.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-incarnations-'));
const children = new Set<ChildProcessWithoutNullStreams>();
let etcd: EtcdServer | undefined;
const leaseTtlMs = 1_500;

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** One incarnation process and the lines it printed. */
class IncarnationProcess {
  readonly lines: string[] = [];
  #stderr = '';
  #wake: () => void = () => {};
  readonly exited: Promise<number | null>;

  constructor(
    readonly incarnation: string,
    readonly child: ChildProcessWithoutNullStreams,
  ) {
    children.add(child);
    let pending = '';
    child.stdout.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      const complete = pending.split('\n');
      pending = complete.pop()!;
      this.lines.push(...complete);
      this.#wake();
    });
    child.stderr.on('data', (chunk: Buffer) => (this.#stderr += chunk.toString()));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code) => {
        children.delete(child);
        this.#wake();
        resolve(code);
      }),
    );
  }

  /** Waits for a line that starts with `prefix` (event-driven; the guard only bounds a hang). */
  async line(prefix: string, guardMs = 60_000): Promise<string> {
    const giveUpAt = Date.now() + guardMs;
    for (;;) {
      const found = this.lines.find((line) => line.startsWith(prefix));
      if (found !== undefined) return found;
      if (!children.has(this.child) || Date.now() > giveUpAt) {
        throw new Error(
          `${this.incarnation}: no "${prefix}" line; stdout ${JSON.stringify(this.lines)}, stderr ${this.#stderr}`,
        );
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 500);
      });
    }
  }
}

function startIncarnation(
  backend: 'sqlite' | 'etcd',
  location: string,
  workerId: string,
  incarnation: string,
): IncarnationProcess {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@kvreuse/source',
      '--import',
      'tsx',
      script,
      backend,
      location,
      workerId,
      incarnation,
      String(leaseTtlMs),
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  return new IncarnationProcess(incarnation, child);
}

const summary = (readiness: WorkerReadiness): string =>
  readiness.ready ? `ready ${readiness.incarnation}` : `${readiness.reasons[0]!.kind} ${readiness.incarnation ?? '-'}`;

async function stalledIncarnationScenario(
  backend: 'sqlite' | 'etcd',
  location: string,
  store: DiscoveryStore,
): Promise<void> {
  const workerId = `decode-stalled-${backend}`;
  const seen: string[] = [];
  const watch = await watchWorkerReadiness(store, workerId, { onChange: (readiness) => seen.push(summary(readiness)) });
  const until = (expected: string) =>
    vi.waitFor(() => expect(seen.at(-1)).toBe(expected), { timeout: 60_000, interval: 20 });

  const old = startIncarnation(backend, location, workerId, 'inc-1');
  const oldEpoch = Number((await old.line('published ')).split(' ')[1]);
  await until('ready inc-1');

  // Stopped past its lease: wait until discovery has deleted its part (the lease lapsed).
  await stopProcess(old.child.pid!);
  await until('no-parts -');

  const replacement = startIncarnation(backend, location, workerId, 'inc-2');
  const newEpoch = Number((await replacement.line('published ')).split(' ')[1]);
  expect(newEpoch).toBeGreaterThan(oldEpoch);
  await until('ready inc-2');

  // Continued: before anything else it checks its epoch, and learns it was superseded.
  old.child.kill('SIGCONT');
  expect(await old.line('superseded ')).toBe(`superseded SUPERSEDED inc-2 ${newEpoch}`);
  old.child.kill('SIGTERM');
  expect(await old.line('stopped ')).toBe('stopped 0');
  expect(await old.exited).toBe(0);
  await watch.settled();
  expect(watch.current).toMatchObject({ ready: true, incarnation: 'inc-2', epoch: newEpoch });

  replacement.child.kill('SIGTERM');
  expect(await replacement.line('stopped ')).toBe('stopped 0');
  expect(await replacement.exited).toBe(0);
  await until('no-parts -');
  await watch.close();
  // Once inc-2 was ready, inc-1 never was again: the whole sequence, in order.
  expect(seen).toEqual(['no-parts -', 'ready inc-1', 'no-parts -', 'ready inc-2', 'no-parts -']);
}

describe('a stalled old incarnation never takes readiness back', () => {
  test('two processes on one SQLite discovery file', async () => {
    const path = join(dir, 'discovery.sqlite');
    const store = openSqliteDiscovery(path, { pollIntervalMs: 5 });
    try {
      await stalledIncarnationScenario('sqlite', path, store);
    } finally {
      await store.close();
    }
  });

  test.skipIf(!etcdRuns)('two processes on a real etcd', async () => {
    etcd = await EtcdServer.start();
    const store = connectEtcdDiscovery({ hosts: etcd.url, requestTimeoutMs: 2_000 });
    try {
      await stalledIncarnationScenario('etcd', etcd.url, store);
    } finally {
      await store.close();
    }
  });
});
