// drain.10k_ops.overhead_ms: 10,000 operations in flight on the loopback backend (completions held
// natively), a drain started, then the completions released at once. The figure is the time from the
// last native completion reaching JavaScript (its `done` settling, observed before the ledger sees
// it) to the drain report: the ledger's and the drain's own work after the native layer is done.
// Median of 31 runs after 1 warm-up: a window of well under a millisecond that a scavenge of the
// 10,000 operations' objects lands in takes 4-13 ms, and one window in five or so does; over 7 runs
// such windows moved the median above the goal in two full bench runs of six (2026-12-06). The note
// counts them. The anchor is the native layer's delivery of the 10,000 completions (first to last),
// for scale. `drain.10k_ops.ledger_ms` is the share before the first native deregistration.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PostRequest } from '@kvreuse/native-bindings';
import { openLoopbackWorld } from '../test/support/loopback-world.js';

const OPERATIONS = 10_000;
const RUNS = 31;
const WARMUP = 1;

interface Sample {
  readonly overheadMs: number;
  readonly ledgerMs: number;
  readonly deliveryMs: number;
}

async function once(): Promise<Sample> {
  const world = await openLoopbackWorld({
    ranks: 2,
    banksPerRank: 4,
    timeouts: { operationTimeoutMs: 60_000, abandonTimeoutMs: 120_000 },
  });
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  const stamp = () => {
    const now = performance.now();
    if (now < first) first = now;
    last = now;
  };
  // The ledger posts through this agent; stamping each completion before the ledger handles it.
  const post = world.reader.post.bind(world.reader);
  Object.defineProperty(world.ledger.agent, 'post', {
    value: (request: PostRequest) => {
      const operation = post(request);
      operation.done.then(stamp, stamp);
      return operation;
    },
  });
  // The drain deregisters the last-registered bank first: stamp when that native call begins.
  let deregistering = Number.NaN;
  const lastRegion = world.banks.at(-1)!.region!;
  const deregister = lastRegion.deregister.bind(lastRegion);
  lastRegion.deregister = () => {
    deregistering = performance.now();
    return deregister();
  };
  // One prepared request per bank, posted again and again: what is measured is the ledger's and the drain's
  // work, not the bench building 10,000 requests (a third of what a post allocated, and collections with it).
  const prepared = world.banks.map((bank) => ({ request: world.request([bank]), banks: [bank] }));
  world.reader.faults.delayCompletions('forever');
  for (let i = 0; i < OPERATIONS; i++) {
    const { request, banks } = prepared[i % prepared.length]!;
    world.ledger.post(request, { ticket: world.ticket(), banks });
  }
  const drained = world.controller.drain({ deadlineMs: 60_000 });
  world.reader.faults.clear();
  const report = await drained;
  const end = performance.now();
  if (report.completed !== OPERATIONS || report.banksReturned.length !== 8) {
    throw new Error(
      `unexpected drain report: ${report.completed} completed, ${report.banksReturned.length} banks returned`,
    );
  }
  await world.controller.shutdown();
  await world.closeSource();
  return { overheadMs: end - last, ledgerMs: deregistering - last, deliveryMs: last - first };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

const samples: Sample[] = [];
for (let run = 0; run < WARMUP + RUNS; run++) {
  const sample = await once();
  if (run >= WARMUP) samples.push(sample);
}
const overhead = median(samples.map((s) => s.overheadMs));
const ledger = median(samples.map((s) => s.ledgerMs));
const delivery = median(samples.map((s) => s.deliveryMs));
const round = (value: number) => Math.round(value * 1000) / 1000;

const figures = {
  'drain.10k_ops.overhead_ms': {
    value: round(overhead),
    unit: 'ms',
    anchor: round(delivery),
    ratio: round(overhead / delivery),
    goal: '≤ 1 ms',
    note: `median of ${RUNS} runs; ${samples.filter((s) => s.overheadMs > 1).length} above 1 ms, the longest ${round(Math.max(...samples.map((s) => s.overheadMs)))} ms`,
  },
  // The same interval up to the first bank deregistration: the ledger's own share, without the 16
  // native calls (8 deregistrations, 8 frees) that return the banks.
  'drain.10k_ops.ledger_ms': {
    value: round(ledger),
    unit: 'ms',
    anchor: round(overhead),
    ratio: round(ledger / overhead),
  },
};
const out = join(dirname(fileURLToPath(import.meta.url)), '../../../bench/parts/drain.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify({ figures }, null, 2)}\n`);
console.log(readFileSync(out, 'utf8'));
console.log(
  `runs: ${samples.map((s) => `${s.overheadMs.toFixed(3)} ms (ledger ${s.ledgerMs.toFixed(3)} ms) after ${s.deliveryMs.toFixed(1)} ms of delivery`).join('; ')}`,
);
