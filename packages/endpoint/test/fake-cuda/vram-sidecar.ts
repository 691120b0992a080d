// Run by src/engine-sidecar-vram-fake-cuda.test.ts with the fake CUDA driver of native/test/fake_cuda named
// in KVT_CUDA_LIBRARY (host memory behind the driver's entry points): an EngineSidecar at the socket path it
// is given, serving GPU memory behind an admission gate, and a prefill worker of TP 1 with vram banks; both
// on loopback agents of this process. Once an engine adopts, the prefill pulls every block of its chain,
// verified (both sides summed by the checksum kernel), and reports the receipt.
// Its lines: `listening`, each report of the sidecar (`{ event: report.kind, ... }`), `receipt`, and after
// the engine's withdrawal `state` (engines served); then a line on stdin closes it (`closed`). It tests the
// sidecar's plumbing above the driver, never a GPU.
import { createInterface } from 'node:readline';
import { ClusterSecret, MemoryDiscoveryStore, type ReadinessGate } from '@kvreuse/discovery';
import { loadTransport } from '@kvreuse/native-bindings';
import { EngineSidecar } from '../../src/engine-sidecar.js';
import { allReady, BLOCKS, hintFor, openWorker, start } from '../support/endpoint-workers.js';
import { defaultSettings } from '../support/settings.js';

// Profile admission is a layer of its own, tested there: here a gate that passes every worker.
const admissionGate: ReadinessGate = { name: 'profile-admission', evaluate: () => ({ pass: true }) };
const [socketPath = ''] = process.argv.slice(2);
const write = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);

const store = new MemoryDiscoveryStore();
const cleanups: (() => Promise<unknown>)[] = [];
let withdrawn: () => void = () => undefined;
const gone = new Promise<void>((resolve) => (withdrawn = resolve));
let adopted: (source: { workerId: string; incarnation: string; epoch: number }) => void = () => undefined;
const engine = new Promise<{ workerId: string; incarnation: string; epoch: number }>((resolve) => (adopted = resolve));
const sidecar = new EngineSidecar({
  transport: loadTransport(),
  path: socketPath,
  discovery: store,
  secret: ClusterSecret.ofThisProcess(),
  settings: defaultSettings,
  backend: 'loopback',
  host: 'test-host',
  admissionGate,
  onReport: (report) => {
    write({ event: report.kind, ...report });
    if (report.kind === 'adopted') adopted(report);
    if (report.kind === 'withdrawn') withdrawn();
  },
});
write({ event: 'listening' });

const source = await engine;
const prefill = await openWorker(
  store,
  { workerId: 'prefill-gpu', role: 'prefill', tpSize: 1, gpu: 0, admissionGate },
  cleanups,
);
await start(prefill);
await allReady(prefill);
const receipt = await prefill.ranks[0]!.endpoint.pull({
  hint: hintFor(source, BLOCKS, { tier: 'gpu' }),
  destinationBlocks: Uint32Array.from({ length: BLOCKS }, (_, i) => BLOCKS - 1 - i),
});
const { requested, blocks, verify, checkedBlocks, recomputed } = receipt;
write({ event: 'receipt', requested, blocks, verify, checkedBlocks, recomputed });

await gone;
write({ event: 'state', engines: sidecar.engines.length });
const commands = createInterface({ input: process.stdin });
await new Promise((resolve) => commands.once('line', resolve));
commands.close();
for (const cleanup of cleanups.reverse()) await cleanup();
await sidecar.close();
await store.close();
write({ event: 'closed' });
