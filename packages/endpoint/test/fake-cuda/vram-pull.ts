// Run by src/vram-pull-fake-cuda.test.ts with the fake CUDA driver of native/test/fake_cuda named in
// KVT_CUDA_LIBRARY (host memory behind the driver's entry points): a decode worker of TP 2 serving and a
// prefill worker of TP 1, their banks in vram, on loopback agents of this process; the prefill pulls 6
// blocks with full verification (both sides' checksums by the GPU's kernel) and prints its receipt as one
// JSON line. It tests the endpoint's plumbing above the driver, never a GPU.
import { MemoryDiscoveryStore, type ReadinessGate } from '@kvreuse/discovery';
import { allReady, hintFor, openWorker, start } from '../support/endpoint-workers.js';

// Profile admission is a layer of its own, tested there: here a gate that passes every worker.
const admissionGate: ReadinessGate = { name: 'profile-admission', evaluate: () => ({ pass: true }) };
const cleanups: (() => Promise<unknown>)[] = [];
const store = new MemoryDiscoveryStore();
const worker = (workerId: string, role: 'decode' | 'prefill', tpSize: number) =>
  openWorker(store, { workerId, role, tpSize, gpu: 0, admissionGate, serve: role === 'decode' }, cleanups);
const decode = await worker('decode-gpu', 'decode', 2);
const prefill = await worker('prefill-gpu', 'prefill', 1);
for (const side of [decode, prefill]) await start(side);
await allReady(decode);
await allReady(prefill);
const receipt = await prefill.ranks[0]!.endpoint.pull({
  hint: hintFor(decode, 6, { tier: 'gpu' }),
  destinationBlocks: Uint32Array.from({ length: 6 }, (_, i) => i),
});
const { requested, blocks, bytes, bytesMoved, verify, checkedBlocks, recomputed } = receipt;
process.stdout.write(
  `${JSON.stringify({ event: 'receipt', requested, blocks, bytes, bytesMoved, verify, checkedBlocks, recomputed })}\n`,
);
for (const cleanup of cleanups.reverse()) await cleanup();
await store.close();
