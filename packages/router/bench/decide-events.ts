// route.decide.events_fed.p99_us: the router deciding from an inventory fed only by engine KV events
// (EngineInventoryFeed of @kvreuse/engine-events), as a router beside vLLM engines does: 1,000 engine
// workers, each announced under the incarnation and epoch the feed gives it, ready and done warming.
//
// Workload: each worker stored 4 conversations of 64 blocks (llama-3.1-8b, 64 tokens a block) in host
// memory (medium CPU), one BlockStored per 16-block run, chained to the run before; 30 % of conversations
// begin with 8–64 blocks of one of 200 pooled conversations, so that a prefix is held by several workers.
// Engine hashes are random 64-bit integers (the engine's own); the feed indexes each block under
// kvreuse's chain hash of its tokens. Queries: half a retained conversation, a quarter a retained
// prefix with a new tail, a quarter a chain nobody holds, given as kvreuse chains (hashing a prompt is
// not measured). Each decision is timed on its own; the figure is the p99 over the queries of each
// one's least time over the rounds.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EngineInventoryFeed } from '@kvreuse/engine-events';
import { hashBlockChain, RetainedInventory } from '@kvreuse/inventory';
import { below, random32 } from './random.js';
import { decide, type RouteContext, SourceBook } from '../src/index.js';
import { llama, readyOf, settingsOf, workerOf } from '../test/support.js';

const workers = 1_000;
const conversationsPerWorker = 4;
const chainBlocks = 64;
const runBlocks = 16;
const pooled = 200;
const queries = 10_000;
const rounds = 3;
const blockTokens = llama.blockTokens;
const scheme = { salt: 0x5eedn, blockTokens };

const freshTokens = (blocks: number): number[] => Array.from({ length: blocks * blockTokens }, () => below(151_936));

const settings = settingsOf();
const inventory = new RetainedInventory({ expectedBlocks: workers * conversationsPerWorker * chainBlocks });
const feed = new EngineInventoryFeed({ inventory, scheme });
const sources = new SourceBook();
const destination = workerOf('prefill-0', { role: 'prefill' });
const pool = Array.from({ length: pooled }, () => freshTokens(chainBlocks));
const retained: number[][] = [];
console.log(
  `router events bench: ${workers} engine workers × ${conversationsPerWorker * chainBlocks} blocks on ${cpus().length} cores, load ${loadavg()[0]!.toFixed(1)}`,
);

let feedMs = 0;
for (let w = 0; w < workers; w++) {
  const id = `vllm-${String(w).padStart(4, '0')}/dp0`;
  for (let c = 0; c < conversationsPerWorker; c++) {
    let tokens = freshTokens(chainBlocks);
    if (below(100) < 30) {
      const shared = pool[below(pooled)]!.slice(0, (8 + below(chainBlocks - 7)) * blockTokens);
      tokens = [...shared, ...tokens.slice(shared.length)];
    }
    if (c === 0 && w % 10 === 0) retained.push(tokens);
    let parent: bigint | null = null;
    for (let run = 0; run < chainBlocks / runBlocks; run++) {
      const blockHashes = Array.from({ length: runBlocks }, () => (BigInt(random32()) << 32n) | BigInt(random32()));
      const start = performance.now();
      feed.apply(id, {
        ts: Date.now() / 1000,
        dataParallelRank: 0,
        unknownEventTypes: [],
        events: [
          {
            type: 'BlockStored',
            blockHashes,
            parentBlockHash: parent,
            tokenIds: tokens.slice(run * runBlocks * blockTokens, (run + 1) * runBlocks * blockTokens),
            blockSize: blockTokens,
            loraId: null,
            medium: 'CPU',
            loraName: null,
            extraKeys: null,
            groupIdx: null,
            kvCacheSpecKind: null,
            kvCacheSpecSlidingWindow: null,
          },
        ],
      });
      feedMs += performance.now() - start;
      parent = blockHashes[runBlocks - 1]!;
    }
  }
  const { incarnation, epoch } = feed.identity(id)!;
  sources.observe(readyOf(workerOf(id, { incarnation }), epoch));
  sources.inventoryComplete(id, epoch);
}
console.log(`router events bench: ${inventory.size} blocks fed by events in ${Math.round(feedMs)} ms`);

const prompts: BigUint64Array[] = [];
for (let q = 0; q < queries; q++) {
  const kind = below(4);
  const held = retained[below(retained.length)]!;
  if (kind <= 1) prompts.push(hashBlockChain(held, scheme));
  else if (kind === 2) {
    const keep = 1 + below(chainBlocks - 1);
    prompts.push(hashBlockChain([...held.slice(0, keep * blockTokens), ...freshTokens(chainBlocks - keep)], scheme));
  } else prompts.push(hashBlockChain(freshTokens(chainBlocks), scheme));
}

const context: RouteContext = {
  settings,
  inventory,
  sources,
  activation: { mode: 'host-only', reasons: ['GPU reuse is not measured here'] },
};
const best = new Float64Array(queries).fill(Infinity);
let pulls = 0;
for (let round = 0; round < rounds; round++) {
  for (let q = 0; q < queries; q++) {
    const start = performance.now();
    const decision = decide({ chain: prompts[q]!, destination: { worker: destination, localBlocks: 0 } }, context);
    const us = (performance.now() - start) * 1000;
    if (us < best[q]!) best[q] = us;
    if (round === 0 && decision.action === 'pull') pulls++;
  }
}
if (pulls === 0) throw new Error('no decision pulled: the engine-fed inventory was not found');
const sorted = Float64Array.from(best).sort();
const p99 = sorted[Math.floor(queries * 0.99)]!;
const p50 = sorted[Math.floor(queries * 0.5)]!;
const figures = {
  'route.decide.events_fed.p99_us': {
    value: Number(p99.toFixed(3)),
    unit: 'µs',
    goal: '≤ 50',
    note: `${workers} engine workers fed by BlockStored events (${inventory.size} blocks, fed in ${Math.round(feedMs)} ms); p50 ${p50.toFixed(2)} µs; ${pulls} of ${queries} decisions pull; least of ${rounds} rounds per query; load ${loadavg()[0]!.toFixed(1)}`,
  },
};
console.log(JSON.stringify(figures, null, 2));
const partPath = join(dirname(fileURLToPath(import.meta.url)), '../../../bench/parts/router-events.json');
mkdirSync(dirname(partPath), { recursive: true });
writeFileSync(partPath, `${JSON.stringify({ figures }, null, 2)}\n`);
