// The transfer path for 4,096 blocks of a 64-layer, 2-plane HND geometry from TP 8 to TP 4: building the
// transfer template once per worker pair and checking one request's block lists against it, each next to
// the cost of merely filling the typed arrays of the same transfer's explicit descriptors (the floor any
// planner that writes them pays: what the template path avoids). Then the size of an NHD template next to
// an HND one.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  assembleWorker,
  buildTransferTemplate,
  type Geometry,
  layoutRankBanks,
  materialize,
  prepareTransfer,
  type RankPart,
  type Role,
  type Worker,
} from '../src/index.js';

const hnd: Geometry = {
  numLayers: 64,
  kvPlanes: 2,
  blockTokens: 64,
  numKvHeads: 8,
  headDim: 128,
  dtype: 'bf16',
  bankLayout: 'layer-separate',
  headOrder: 'HND',
};
const BLOCKS = 4096;
const BANK_BLOCKS = 8192;
const WARMUP = 3;
const RUNS = 15;

function worker(tpSize: number, role: Role, geometry: Geometry = hnd): Worker {
  const parts: RankPart[] = Array.from({ length: tpSize }, (_, tpRank) => {
    const parallel = { tpRank, tpSize, ppRank: 0, ppSize: 1, dpRank: 0 };
    const banks = layoutRankBanks(geometry, parallel, {
      address: 0x7f00_0000_0000n + BigInt(tpRank) * 2n ** 40n,
      blocks: BANK_BLOCKS,
    });
    return {
      version: 1,
      workerId: `${role}-tp${tpSize}`,
      incarnation: '1',
      role,
      geometry,
      parallel,
      banks,
      transport: { agentName: `${role}-${tpRank}`, generation: 1, metadata: '' },
    };
  });
  const result = assembleWorker(parts);
  if (!result.complete) throw new Error('benchmark worker is incomplete');
  return result.worker;
}

// Retained decode blocks are scattered: a fixed pseudo-random choice of 4,096 of 8,192 source blocks.
function scatteredBlocks(): { sourceBlocks: Uint32Array; destinationBlocks: Uint32Array } {
  const order = Uint32Array.from({ length: BANK_BLOCKS }, (_, i) => i);
  let seed = 0x9e3779b9;
  for (let i = order.length - 1; i > 0; i--) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    const j = seed % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return { sourceBlocks: order.slice(0, BLOCKS), destinationBlocks: Uint32Array.from({ length: BLOCKS }, (_, i) => i) };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Median milliseconds of one `run()`, each sample timing `repeat` runs. */
function measure(run: () => void, repeat = 1): number {
  for (let i = 0; i < WARMUP * repeat; i++) run();
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = process.hrtime.bigint();
    for (let j = 0; j < repeat; j++) run();
    times.push(Number(process.hrtime.bigint() - start) / 1e6 / repeat);
  }
  return median(times);
}

const source = worker(8, 'decode');
const destination = worker(4, 'prefill');
const blocks = scatteredBlocks();
const template = buildTransferTemplate(source, destination);
// The explicit descriptors the same request stands for, written once to count them.
const plan = materialize(template, blocks);
const descriptors = plan.descriptorCount;

let sink = 0;
// The floor: allocate and write the same five typed arrays (32 bytes a descriptor) with no planning.
const floorMs = measure(() => {
  const bank = new Uint32Array(descriptors);
  const destinationBank = new Uint32Array(descriptors);
  const offset = new Uint32Array(descriptors * 2);
  const destinationOffset = new Uint32Array(descriptors * 2);
  const length = new Uint32Array(descriptors * 2);
  for (let i = 0; i < descriptors; i++) {
    bank[i] = i;
    destinationBank[i] = i;
    offset[2 * i] = i;
    destinationOffset[2 * i] = i;
    length[2 * i] = i;
  }
  sink += length[descriptors - 1]!;
});

// The prepared path: a template once per worker pair, then per request only the block lists are checked.
const templateMs = measure(() => {
  sink += buildTransferTemplate(source, destination).routeCount;
}, 20);
const preparedUs =
  measure(() => {
    sink += prepareTransfer({ template, ...blocks }).sourceBlocks.length;
  }, 200) * 1000;
// NHD splits every destination piece per token at TP 1 → TP 2; the template still holds one segment per route.
const nhd: Geometry = { ...hnd, headOrder: 'NHD' };
const nhdBytes = buildTransferTemplate(worker(1, 'decode', nhd), worker(2, 'prefill', nhd)).byteLength;
const hndBytes = buildTransferTemplate(worker(1, 'decode'), worker(2, 'prefill')).byteLength;

const figures = {
  'plan.tp8_to_tp4.4096x64.descriptors': { value: descriptors, unit: 'descriptors' },
  'plan.template.tp8_to_tp4.4096x64.ms': {
    value: templateMs,
    unit: 'ms',
    anchor: floorMs,
    ratio: templateMs / floorMs,
    goal: '≤ 5 ms',
    note: `once per worker pair: ${template.routeCount} routes, ${template.byteLength} bytes; anchor: allocating and filling the ${descriptors} × 32 bytes of typed arrays of the explicit descriptors, without planning`,
  },
  'plan.prepared.tp8_to_tp4.4096x64.us': {
    value: preparedUs,
    unit: 'µs',
    anchor: floorMs * 1000,
    ratio: preparedUs / (floorMs * 1000),
    goal: '≤ 50 µs',
    note: `per request, JavaScript side: checking ${BLOCKS} block pairs against the template (prepareTransfer); anchor: filling the explicit descriptors' typed arrays`,
  },
  'plan.nhd.tp1_to_tp2.vs_hnd': {
    value: nhdBytes / hndBytes,
    unit: 'ratio',
    anchor: hndBytes,
    goal: '≤ 2',
    note: `template bytes, NHD ${nhdBytes} over HND ${hndBytes}, TP 1 → TP 2, ${hnd.numLayers} layers`,
  },
};
const out = join(dirname(fileURLToPath(import.meta.url)), '../../../bench/parts/descriptors.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify({ figures }, null, 2)}\n`);
console.log(
  `${BLOCKS} blocks × ${hnd.numLayers} layers × ${hnd.kvPlanes} planes, TP 8 → TP 4 (HND): ` +
    `${descriptors} explicit descriptors, ${plan.totalBytes} bytes ` +
    `(filling their typed arrays alone: median ${floorMs.toFixed(2)} ms)`,
);
console.log(
  `template once per worker pair: median ${templateMs.toFixed(3)} ms (${template.routeCount} routes, ${template.byteLength} bytes); ` +
    `per request: median ${preparedUs.toFixed(1)} µs to check ${BLOCKS} block pairs; NHD/HND template size TP 1 → TP 2: ${nhdBytes}/${hndBytes}`,
);
// Keeps the measured work observable, so it cannot be optimised away.
if (sink === 0) console.log('no descriptors planned');
