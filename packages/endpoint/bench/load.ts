// load.pulls_per_s and load.p99_ms: 10,000 pulls of 4 blocks, by 8 destination workers pulling at once
// (each one pull after another) from one serving decode worker of TP 2, every pull pinned, read, fully
// verified and released, all on the loopback backend in this process over the memory discovery store.
// The geometry is tiny (128-byte pieces), so the figures measure the endpoint's protocol: pin request
// and grant over notifications, prepared posts, per-block checksums, release. The rate counts until every
// pull's pins were given back; a pull's latency ends when it resolves, once verified. The run fails unless the
// source ends where it started: no pin held, and its agents' native gauges (operations, notifications
// pending, registrations, allocations, peers) at their starting values.
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Counters } from '@kvreuse/native-bindings';
import { MemoryDiscoveryStore } from '@kvreuse/discovery';
import { allReady, hintFor, openWorker, start, type TestWorker } from '../test/support/endpoint-workers.js';

const PULLS = 10_000;
const DESTINATIONS = 8;
const BLOCKS_PER_PULL = 4;
const WARMUP_PULLS = 50;

const cleanups: (() => Promise<unknown>)[] = [];
const store = new MemoryDiscoveryStore();
const decode = await openWorker(store, { workerId: 'decode-0', role: 'decode', tpSize: 2, serve: true }, cleanups);
const readers: TestWorker[] = [];
for (let index = 0; index < DESTINATIONS; index++)
  readers.push(await openWorker(store, { workerId: `prefill-${index}`, role: 'prefill', tpSize: 1 }, cleanups));
await start(decode);
for (const reader of readers) await start(reader);
await allReady(decode);
for (const reader of readers) await allReady(reader);

const gauges = [
  'liveOperations',
  'inflightOperations',
  'pendingNotifications',
  'liveRegistrations',
  'registeredBytes',
  'liveAllocations',
  'allocatedBytes',
  'livePeers',
] as const;
const sourceGauges = () =>
  decode.ranks.map(({ agent }) =>
    Object.fromEntries(gauges.map((name) => [name, (agent.counters() as Counters)[name]])),
  );
const heldPins = () => decode.ranks.reduce((sum, { endpoint }) => sum + (endpoint.pinServer?.heldPins ?? 0), 0);
const destinationBlocks = Uint32Array.from({ length: BLOCKS_PER_PULL }, (_, block) => block);
const hint = hintFor(decode, BLOCKS_PER_PULL);

async function pullAll(count: number, latencies: number[]): Promise<void> {
  let next = 0;
  await Promise.all(
    readers.map(async (reader) => {
      const endpoint = reader.ranks[0]!.endpoint;
      while (next < count) {
        next += 1;
        const started = performance.now();
        const receipt = await endpoint.pull({ hint, destinationBlocks, verify: 'full', policy: 'fail' });
        latencies.push(performance.now() - started);
        if (receipt.blocks !== BLOCKS_PER_PULL || receipt.checkedBlocks !== BLOCKS_PER_PULL) {
          throw new Error(
            `a pull moved ${receipt.blocks} blocks and verified ${receipt.checkedBlocks}, not ${BLOCKS_PER_PULL}`,
          );
        }
      }
    }),
  );
}

/** Once every pull's pins are given back (a pull resolves before its sources answer the release). */
const pinsReleased = () => Promise.all(readers.map((reader) => reader.ranks[0]!.endpoint.pinsReleased()));

// Peers are loaded and the code is warm before the start values are taken.
await pullAll(WARMUP_PULLS, []);
await pinsReleased();
const before = { gauges: sourceGauges(), pins: heldPins() };
const latencies: number[] = [];
const started = performance.now();
await pullAll(PULLS, latencies);
await pinsReleased();
const seconds = (performance.now() - started) / 1000;
const after = { gauges: sourceGauges(), pins: heldPins() };
if (JSON.stringify(after) !== JSON.stringify(before)) {
  throw new Error(
    `the source did not end where it started: before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`,
  );
}

const sorted = latencies.sort((a, b) => a - b);
const percentile = (p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
const round = (value: number) => Math.round(value * 1000) / 1000;
const load = loadavg()
  .map((value) => value.toFixed(1))
  .join(', ');
const setting = `${PULLS.toLocaleString('en-US')} pulls of ${BLOCKS_PER_PULL} blocks by ${DESTINATIONS} destinations at once from one TP 2 source, loopback, full verification`;
const figures = {
  'load.pulls_per_s': {
    value: round(PULLS / seconds),
    unit: 'pulls/s',
    note: `${setting}: ${seconds.toFixed(2)} s; the source's pins and native gauges back at their starting values; load average ${load}`,
  },
  'load.p99_ms': {
    value: round(percentile(99)),
    unit: 'ms',
    anchor: round(percentile(50)),
    ratio: round(percentile(99) / percentile(50)),
    note: `one pull's time (pin, read, verify; its release goes on after) with ${DESTINATIONS} pulling at once; anchor: the median; max ${round(sorted.at(-1) ?? Number.NaN)} ms`,
  },
};

for (const cleanup of cleanups.reverse()) await cleanup();
await store.close();
const out = join(dirname(fileURLToPath(import.meta.url)), '../../../bench/parts/endpoint.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify({ figures }, null, 2)}\n`);
console.log(JSON.stringify(figures, null, 2));
