// The GPU check's whole fetch between vram banks through the endpoints, between two processes: a decode
// worker of TP 2 serving the main job's prefix (42 blocks of Qwen3-0.6B, bf16, 64 tokens) in a process of
// its own (this script with `serve <discovery file>`), and a prefill worker of TP 1 here, their banks in
// GPU 0's memory, on ucx agents over one SQLite discovery file: the pull reads the source's vram through
// CUDA IPC. Each pull pins, moves by template and verifies in full on the GPU. Prints one JSON object: the
// last receipt's blocks and checks, the mean and least milliseconds of REPEATS pulls after one to warm up,
// and the mean of each phase the receipts report (pin round trip, transfer, verification, release). Bundled by bundle.mjs into the payload as fetch.mjs; run by run.sh.
import { spawn } from 'node:child_process';
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
import { allReady, hintFor, openWorker, start } from '../../packages/endpoint/test/support/endpoint-workers.js';

const BLOCKS = 42;
const REPEATS = 10;
const geometry = referenceGeometries['qwen3-0.6b'];
// Profile admission is not what this measures: a gate that passes both workers.
const admissionGate: ReadinessGate = { name: 'profile-admission', evaluate: () => ({ pass: true }) };

/** One worker on GPU 0 over the discovery file at `path`, published and ready. */
async function worker(
  store: DiscoveryStore,
  path: string,
  role: 'decode' | 'prefill',
  cleanups: (() => Promise<unknown>)[],
) {
  const secret = openClusterSecret({ backend: 'sqlite', sqlitePath: path, secretFile: '' });
  const spec = { workerId: `${role}-gpu`, role, tpSize: role === 'decode' ? 2 : 1, geometry, blocks: BLOCKS };
  const opened = await openWorker(
    store,
    { ...spec, gpu: 0, admissionGate, serve: role === 'decode', backend: 'ucx', secret, clock: systemClock },
    cleanups,
  );
  await start(opened);
  await allReady(opened);
  return opened;
}

/** `serve <path>`: the source process, until its stdin closes. */
async function serve(path: string): Promise<void> {
  const store = openSqliteDiscovery(path);
  const cleanups: (() => Promise<unknown>)[] = [];
  const decode = await worker(store, path, 'decode', cleanups);
  const { workerId, incarnation } = decode.identity;
  process.stdout.write(`${JSON.stringify({ workerId, incarnation, epoch: decode.ranks[0]?.endpoint.epoch })}\n`);
  await new Promise((resolve) => process.stdin.once('close', resolve).resume());
  for (const cleanup of cleanups.reverse()) await cleanup();
  await store.close();
}

/** The prefill here pulls from the source process REPEATS + 1 times. */
async function fetchFromAnotherProcess(): Promise<void> {
  const folder = mkdtempSync(join(tmpdir(), 'kvreuse-gpu-fetch-'));
  const path = join(folder, 'discovery.sqlite');
  const store = openSqliteDiscovery(path);
  const source = spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve', path], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const [line] = await createInterface({ input: source.stdout })
      [Symbol.asyncIterator]()
      .next()
      .then((r) => [r.value]);
    if (line === undefined) throw new Error('the source process ended before it was ready');
    const named = JSON.parse(line as string) as { workerId: string; incarnation: string; epoch: number };
    const prefill = await worker(store, path, 'prefill', cleanups);
    const destinationBlocks = Uint32Array.from({ length: BLOCKS }, (_, i) => i);
    const hint = hintFor(named, BLOCKS, { tier: 'gpu', blockTokens: geometry.blockTokens });
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
    source.stdin.end();
    await new Promise((resolve) => (source.exitCode === null ? source.once('exit', resolve) : resolve(undefined)));
    await store.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

const [mode, path] = process.argv.slice(2);
await (mode === 'serve' && path !== undefined ? serve(path) : fetchFromAnotherProcess());
