// The GPU check's whole fetch between vram banks through the endpoints, between processes: a decode worker
// of TP 2 serving the main job's prefix (42 blocks of Qwen3-0.6B, bf16, 64 tokens), each rank in a process of
// its own as deployed (this script with `serve <discovery file> <rank> <incarnation>`), and a prefill worker
// of TP 1 here, their banks in GPU 0's memory, on ucx agents over one SQLite discovery file: the pull reads
// the sources' vram through CUDA IPC. Each pull pins, moves by template and verifies in full on the GPU. Prints one JSON object: the
// last receipt's blocks and checks, the mean and least milliseconds of REPEATS pulls after one to warm up,
// and the mean of each phase the receipts report (pin round trip, transfer, verification, release). Bundled by bundle.mjs into the payload as fetch.mjs; run by run.sh.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  type DiscoveryStore,
  openClusterSecret,
  openSqliteDiscovery,
  type ReadinessGate,
} from '../../packages/discovery/src/index.js';
import { referenceGeometries } from '../../packages/descriptors/src/index.js';
import { systemClock } from '../../packages/drain/src/index.js';
import {
  allReady,
  type HintSource,
  hintFor,
  openWorker,
  start,
  type WorkerSpec,
} from '../../packages/endpoint/test/support/endpoint-workers.js';

const BLOCKS = 42;
const REPEATS = 10;
const geometry = referenceGeometries['qwen3-0.6b'];
// Profile admission is not what this measures: a gate that passes both workers.
const admissionGate: ReadinessGate = { name: 'profile-admission', evaluate: () => ({ pass: true }) };

/** One worker on GPU 0 over the discovery file at `path` (of its ranks those `ranks` names), published and ready. */
async function worker(
  store: DiscoveryStore,
  path: string,
  role: 'decode' | 'prefill',
  cleanups: (() => Promise<unknown>)[],
  ranks: Pick<WorkerSpec, 'tpRanks' | 'incarnation'> = {},
) {
  const secret = openClusterSecret({ backend: 'sqlite', sqlitePath: path, secretFile: '' });
  const spec = { workerId: `${role}-gpu`, role, tpSize: role === 'decode' ? 2 : 1, geometry, blocks: BLOCKS };
  const opened = await openWorker(
    store,
    { ...spec, ...ranks, gpu: 0, admissionGate, serve: role === 'decode', backend: 'ucx', secret, clock: systemClock },
    cleanups,
  );
  await start(opened);
  await allReady(opened);
  return opened;
}

/** `serve <path> <rank> <incarnation>`: one rank of the source, until its stdin closes. */
async function serve(path: string, tpRank: number, incarnation: string): Promise<void> {
  const store = openSqliteDiscovery(path);
  const cleanups: (() => Promise<unknown>)[] = [];
  const decode = await worker(store, path, 'decode', cleanups, { tpRanks: [tpRank], incarnation });
  const { workerId } = decode.identity;
  process.stdout.write(`${JSON.stringify({ workerId, incarnation, epoch: decode.ranks[0]?.endpoint.epoch })}\n`);
  await new Promise((resolve) => process.stdin.once('close', resolve).resume());
  for (const cleanup of cleanups.reverse()) await cleanup();
  await store.close();
}

/** The first line `source` writes: what it says once its rank is ready. */
async function readyLine(source: ChildProcess): Promise<HintSource> {
  const { value } = await createInterface({ input: source.stdout! })[Symbol.asyncIterator]().next();
  if (value === undefined) throw new Error('a source process ended before it was ready');
  return JSON.parse(value as string) as HintSource;
}

/** The prefill here pulls from the source processes REPEATS + 1 times. */
async function fetchFromOtherProcesses(): Promise<void> {
  const folder = mkdtempSync(join(tmpdir(), 'kvreuse-gpu-fetch-'));
  const path = join(folder, 'discovery.sqlite');
  const store = openSqliteDiscovery(path);
  const incarnation = `decode-gpu-${process.pid}`;
  const sources = [0, 1].map((tpRank) =>
    spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve', path, String(tpRank), incarnation], {
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  );
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const [named] = await Promise.all(sources.map(readyLine));
    const prefill = await worker(store, path, 'prefill', cleanups);
    const destinationBlocks = Uint32Array.from({ length: BLOCKS }, (_, i) => i);
    const hint = hintFor(named!, BLOCKS, { tier: 'gpu', blockTokens: geometry.blockTokens });
    const times: number[] = [];
    const phases = { pin: 0, transfer: 0, verify: 0, release: 0 };
    let receipt = await prefill.ranks[0]!.endpoint.pull({ hint, destinationBlocks });
    for (let i = 0; i < REPEATS; i++) {
      const begin = performance.now();
      receipt = await prefill.ranks[0]!.endpoint.pull({ hint, destinationBlocks });
      times.push(performance.now() - begin);
      phases.pin += (receipt.phases.pinMs ?? 0) / REPEATS;
      phases.transfer += receipt.ms / REPEATS;
      phases.verify += receipt.phases.verifyMs / REPEATS;
      phases.release += receipt.phases.releaseMs / REPEATS;
    }
    const { blocks, bytes, verify, checkedBlocks, recomputed } = receipt;
    const ms = { ms_mean: times.reduce((sum, t) => sum + t, 0) / REPEATS, ms_min: Math.min(...times) };
    const report = {
      blocks,
      bytes,
      verify,
      checkedBlocks,
      reasons: recomputed.reasons,
      repeats: REPEATS,
      ...ms,
      phases_mean_ms: phases,
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
    for (const source of sources) source.stdin!.end();
    await Promise.all(
      sources.map(
        (source) =>
          new Promise((resolve) => (source.exitCode === null ? source.once('exit', resolve) : resolve(undefined))),
      ),
    );
    await store.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

const [mode, path, tpRank, incarnation] = process.argv.slice(2);
await (mode === 'serve' && path !== undefined && incarnation !== undefined
  ? serve(path, Number(tpRank), incarnation)
  : fetchFromOtherProcesses());
