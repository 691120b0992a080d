// The GPU check's whole fetch between vram banks through the endpoints, in one process: a decode worker of
// TP 2 serving the main job's prefix (42 blocks of Qwen3-0.6B, bf16, 64 tokens) and a prefill worker of
// TP 1, their banks in GPU 0's memory, on loopback agents (so the pull reads the source's vram at its own
// addresses: no CUDA IPC). Each pull pins, moves by template and verifies in full on the GPU; prints one
// JSON object: the last receipt's blocks and checks, and the mean and least milliseconds of REPEATS pulls
// after one to warm up. Bundled by bundle.mjs into the payload; run by run.sh.
import { MemoryDiscoveryStore, type ReadinessGate } from '../../packages/discovery/src/index.js';
import { referenceGeometries } from '../../packages/descriptors/src/index.js';
import { allReady, hintFor, openWorker, start } from '../../packages/endpoint/test/support/endpoint-workers.js';

const BLOCKS = 42;
const REPEATS = 10;
const geometry = referenceGeometries['qwen3-0.6b'];
// Profile admission is not what this measures: a gate that passes both workers.
const admissionGate: ReadinessGate = { name: 'profile-admission', evaluate: () => ({ pass: true }) };
const cleanups: (() => Promise<unknown>)[] = [];
const store = new MemoryDiscoveryStore();
const worker = (workerId: string, role: 'decode' | 'prefill', tpSize: number) =>
  openWorker(
    store,
    { workerId, role, tpSize, geometry, blocks: BLOCKS, gpu: 0, admissionGate, serve: role === 'decode' },
    cleanups,
  );
const decode = await worker('decode-gpu', 'decode', 2);
const prefill = await worker('prefill-gpu', 'prefill', 1);
for (const side of [decode, prefill]) await start(side);
await allReady(decode);
await allReady(prefill);
const destinationBlocks = Uint32Array.from({ length: BLOCKS }, (_, i) => i);
const hint = hintFor(decode, BLOCKS, { tier: 'gpu', blockTokens: geometry.blockTokens });
const times: number[] = [];
let receipt = await prefill.ranks[0]!.endpoint.pull({ hint, destinationBlocks });
for (let i = 0; i < REPEATS; i++) {
  const begin = performance.now();
  receipt = await prefill.ranks[0]!.endpoint.pull({ hint, destinationBlocks });
  times.push(performance.now() - begin);
}
const { blocks, bytes, verify, checkedBlocks, recomputed } = receipt;
process.stdout.write(
  `${JSON.stringify({
    blocks,
    bytes,
    verify,
    checkedBlocks,
    reasons: recomputed.reasons,
    repeats: REPEATS,
    ms_mean: times.reduce((sum, ms) => sum + ms, 0) / REPEATS,
    ms_min: Math.min(...times),
  })}\n`,
);
for (const cleanup of cleanups.reverse()) await cleanup();
await store.close();
