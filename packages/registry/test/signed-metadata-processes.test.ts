// Sealed transport metadata between real OS processes on ucx, meeting in a shared SQLite file and in a
// real etcd: two workers sharing the cluster secret load each other as peers; a third, whose secret is
// another, is refused by them and refuses them, each time before its metadata reached the native layer
// (no peer loaded, no native error counted). An intruder that reads discovery without the secret finds
// no address or key it could hand UCX: it loads no peer, so it has nothing to post a READ to.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, test, vi } from 'vitest';
import { ClusterSecret } from '@kvreuse/discovery';
import { etcdRuns, EtcdServer } from '@kvreuse-internal/test-support';
import { ucxTestsRun } from './helpers/ucx.js';

vi.setConfig({ testTimeout: 120_000 });

const script = fileURLToPath(new URL('./processes/signed-peer-process.ts', import.meta.url));
const intruderScript = fileURLToPath(new URL('./processes/intruder-process.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-signed-'));
const children = new Set<ChildProcessWithoutNullStreams>();
let etcd: EtcdServer | undefined;

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface PeerOutcome {
  readonly peer: string;
  readonly loaded?: number;
  readonly refused?: string;
  readonly refusal?: string;
  readonly livePeers?: number;
  readonly nativeErrors?: number;
}

/** A worker process; `outcomes` resolves with one outcome per peer it was told to load. */
function startWorker(
  backend: 'sqlite' | 'etcd',
  location: string,
  secretFile: string,
  workerId: string,
  peers: readonly string[],
) {
  const child = spawn(
    process.execPath,
    [
      '--conditions=@kvreuse/source',
      '--import',
      'tsx',
      script,
      backend,
      location,
      secretFile,
      workerId,
      peers.join(','),
    ],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const outcomes = new Promise<PeerOutcome[]>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const lines = stdout.split('\n').filter((line) => line !== '');
      if (lines.length === peers.length) resolve(lines.map((line) => JSON.parse(line) as PeerOutcome));
    });
    child.once('exit', (code) => reject(new Error(`${workerId} exited ${code} before loading its peers: ${stderr}`)));
  });
  const stop = () =>
    new Promise<number | string>((resolve) => {
      child.removeAllListeners('exit');
      child.once('exit', (code, signal) => {
        children.delete(child);
        resolve(code ?? `${signal}: ${stderr}`);
      });
      child.kill('SIGTERM');
    });
  return { outcomes, stop };
}

async function twoShareOneSecretAndAThirdIsRefused(
  backend: 'sqlite' | 'etcd',
  location: string,
  shared: string,
  other: string,
): Promise<void> {
  const a = startWorker(backend, location, shared, `${backend}-a`, [`${backend}-b`, `${backend}-c`]);
  const b = startWorker(backend, location, shared, `${backend}-b`, [`${backend}-a`]);
  const c = startWorker(backend, location, other, `${backend}-c`, [`${backend}-a`]);
  const refused = { refused: 'TRANSPORT_METADATA_REFUSED', refusal: 'wrong-signature', livePeers: 0, nativeErrors: 0 };
  expect(await a.outcomes).toEqual([
    { peer: `${backend}-b`, loaded: 2 * referenceLayers },
    { peer: `${backend}-c`, ...refused, livePeers: 1 },
  ]);
  expect(await b.outcomes).toEqual([{ peer: `${backend}-a`, loaded: 2 * referenceLayers }]);
  expect(await c.outcomes).toEqual([{ peer: `${backend}-a`, ...refused }]);
  expect(await Promise.all([a.stop(), b.stop(), c.stop()])).toEqual([0, 0, 0]);
}

/** Qwen3-0.6B's layers: a TP=1 rank registers one bank per (layer, plane). */
const referenceLayers = 28;

/** Runs the intruder process to its end against `victim`; resolves with what it printed. */
function runIntruder(sqlitePath: string, secretFile: string, victim: string): Promise<Record<string, unknown>> {
  const child = spawn(
    process.execPath,
    ['--conditions=@kvreuse/source', '--import', 'tsx', intruderScript, sqlitePath, secretFile, victim],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => {
      children.delete(child);
      if (code === 0) resolve(JSON.parse(stdout) as Record<string, unknown>);
      else reject(new Error(`the intruder exited ${code}: ${stderr}`));
    });
  });
}

describe.runIf(ucxTestsRun)('sealed transport metadata between processes', () => {
  test('an intruder reading the SQLite discovery without the secret reads nothing: no peer loads, refused with its reason', async () => {
    const sqlitePath = join(dir, 'intruded.sqlite');
    const a = startWorker('sqlite', sqlitePath, '', 'victim-a', ['victim-b']);
    const b = startWorker('sqlite', sqlitePath, '', 'victim-b', ['victim-a']);
    expect(await a.outcomes).toEqual([{ peer: 'victim-b', loaded: 2 * referenceLayers }]);
    expect(await b.outcomes).toEqual([{ peer: 'victim-a', loaded: 2 * referenceLayers }]);
    expect(await runIntruder(sqlitePath, join(dir, 'intruder.secret'), 'victim-a')).toEqual({
      code: 'TRANSPORT_METADATA_REFUSED',
      refusal: 'wrong-signature',
      wholeEnvelope: 'INVALID_PARAM',
      behindSlot: 'INVALID_PARAM',
      blobMagicSeen: false,
      livePeers: 0,
    });
    expect(await Promise.all([a.stop(), b.stop()])).toEqual([0, 0]);
  });

  test('on SQLite: two workers on the default secret beside the database load each other; a third with its own secret file is refused', async () => {
    const sqlitePath = join(dir, 'discovery.sqlite');
    const other = join(dir, 'other.secret');
    ClusterSecret.readOrCreate(other);
    await twoShareOneSecretAndAThirdIsRefused('sqlite', sqlitePath, '', other);
    expect(statSync(`${sqlitePath}.secret`).mode & 0o777).toBe(0o600);
  });

  test.skipIf(!etcdRuns)(
    'on etcd: two workers naming one secret file load each other; a third naming another is refused',
    async () => {
      etcd = await EtcdServer.start();
      const shared = join(dir, 'cluster.secret');
      const other = join(dir, 'another.secret');
      ClusterSecret.readOrCreate(shared);
      ClusterSecret.readOrCreate(other);
      await twoShareOneSecretAndAThirdIsRefused('etcd', etcd.url, shared, other);
    },
  );
});
