// Several real processes write one SQLite discovery file at once; a watcher in this process must
// see every revision exactly once, in order, and never a mix of two incarnations of a worker.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, expect, test, vi } from 'vitest';
import { entryText, openSqliteDiscovery } from '../src/index.js';
import { changeLog, recordWatch } from './watch-recorder.js';

vi.setConfig({ testTimeout: 120_000 });

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-procs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const writer = fileURLToPath(new URL('./fixtures/sqlite-writer.ts', import.meta.url));

function runWriter(path: string, workerId: string, rounds: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--conditions=@kvreuse/source', '--import', 'tsx', writer, path, workerId, String(rounds)],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`writer ${workerId} exited ${code}: ${stderr}`)),
    );
  });
}

test('concurrent writer processes: every revision once, in order, no mixed incarnations', async () => {
  const path = join(dir, 'shared.db');
  const store = openSqliteDiscovery(path, { pollIntervalMs: 5 });
  const recorder = await recordWatch(store, '/', { fromRevision: 1 });
  const workers = ['w0', 'w1', 'w2', 'w3'];
  const rounds = 25;
  await Promise.all(workers.map((id) => runWriter(path, id, rounds)));

  const total = workers.length * rounds * 2;
  await recorder.until(`${total} revisions`, (n) => n.length === total);
  const revisions = recorder.notices.map((n) => (n.type === 'changes' ? n.revision : -1));
  expect(revisions).toEqual(Array.from({ length: total }, (_, i) => i + 1));

  // Replay the watch and check, after every revision, that no worker shows two incarnations.
  const parts = new Map<string, number>();
  for (const notice of recorder.notices) {
    if (notice.type !== 'changes') continue;
    for (const event of notice.events) {
      if (event.type === 'delete' && event.key.startsWith('/workers/')) parts.delete(event.key);
      if (event.type === 'put' && event.entry.key.startsWith('/workers/')) {
        parts.set(event.entry.key, (JSON.parse(entryText(event.entry)) as { incarnation: number }).incarnation);
      }
    }
    for (const id of workers) {
      const seen = new Set([...parts].filter(([key]) => key.startsWith(`/workers/${id}/`)).map(([, inc]) => inc));
      expect(seen.size).toBeLessThanOrEqual(1);
    }
  }

  const final = await store.list('/');
  expect(final.revision).toBe(total);
  for (const id of workers) {
    const ranks = final.entries.filter((e) => e.key.startsWith(`/workers/${id}/`));
    expect(ranks.map((e) => JSON.parse(entryText(e)))).toEqual(
      [0, 1, 2].map((rank) => ({ workerId: id, incarnation: rounds - 1, rank })),
    );
    expect(final.entries.filter((e) => e.key.startsWith(`/counters/${id}/`))).toHaveLength(rounds);
  }
  await store.close();
});

test('a lease granted in one process expires for every process, and watchers see the delete', async () => {
  const path = join(dir, 'lease.db');
  const owner = openSqliteDiscovery(path);
  const reader = openSqliteDiscovery(path, { pollIntervalMs: 5 });
  const recorder = await recordWatch(reader, '/leased/');
  const lease = await owner.grantLease(200);
  await owner.put('/leased/part', 'x', { lease: lease.id });
  await owner.close(); // the owner is gone: nobody keeps the lease alive
  await recorder.until('the delete', (n) =>
    n.some((x) => x.type === 'changes' && x.events.some((e) => e.type === 'delete')),
  );
  expect(await reader.get('/leased/part')).toBeUndefined();
  await reader.close();
});

test('a watcher is told when it cannot read the file, and catches up when it can', async () => {
  const path = join(dir, 'locked.db');
  const store = openSqliteDiscovery(path, { pollIntervalMs: 5, busyTimeoutMs: 20 });
  const recorder = await recordWatch(store, '/locked/');
  const lease = await store.grantLease(100);
  await store.put('/locked/part', 'x', { lease: lease.id });
  // Another connection holds the write lock: sweeping the expired lease cannot proceed.
  const other = new Database(path, { timeout: 0 });
  other.prepare('BEGIN IMMEDIATE').run();
  await recorder.until('an outage notice', (n) => n.some((x) => x.type === 'outage'));
  expect(recorder.notices.find((x) => x.type === 'outage')).toMatchObject({
    error: { code: 'DISCOVERY_UNAVAILABLE', backend: 'sqlite' },
  });
  other.prepare('COMMIT').run();
  other.close();
  await recorder.until('the restored notice', (n) => n.some((x) => x.type === 'restored'));
  // What was missed (the lease's delete) comes before restored.
  expect(recorder.notices.map((x) => x.type)).toEqual(['changes', 'outage', 'changes', 'restored']);
  expect(changeLog(recorder.notices)).toEqual(['put /locked/part', 'delete /locked/part']);
  await store.close();
});

test('a new file opened while another process is writing it waits for that write, and ends in WAL mode', async () => {
  const path = join(dir, 'opened-while-written.db');
  // Another process holds a write transaction on a new file not yet in WAL mode, as a process creating the
  // schema does when several open one file together; SQLite refuses the switch to WAL at once meanwhile. It
  // creates discovery's own meta table: a table of another name would make the file another program's.
  const holder = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import Database from 'better-sqlite3';
       const db = new Database(process.env.DISCOVERY_FILE);
       db.exec('BEGIN IMMEDIATE; CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID');
       process.stdout.write('holding\\n');
       process.stdin.once('data', () => setTimeout(() => { db.exec('COMMIT'); db.close(); }, 300));`,
    ],
    { cwd: fileURLToPath(new URL('..', import.meta.url)), env: { ...process.env, DISCOVERY_FILE: path } },
  );
  const exited = new Promise((resolve) => holder.once('exit', resolve));
  await new Promise((resolve) => holder.stdout.once('data', resolve));
  // Told to commit 300 ms from now, the holder still holds the lock when the open below starts, and the
  // open waits for it (a store that refuses at once fails here). Were the holder slower to take the message
  // or faster to commit, the open would still succeed: the outcome does not depend on which comes first.
  await new Promise<void>((resolve) => holder.stdin.end('commit\n', () => resolve()));
  const store = openSqliteDiscovery(path);
  await exited;
  const check = new Database(path, { readonly: true });
  expect(check.pragma('journal_mode', { simple: true })).toBe('wal');
  check.close();
  await store.close();
});
