import { layoutRankBanks, parseRankPart, referenceGeometries } from '@kvreuse/descriptors';
import { MemoryDiscoveryStore, startRankPublication, watchWorkerReadiness } from '@kvreuse/discovery';

const geometry = referenceGeometries['qwen3-0.6b'];
const parallel = { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1, dpRank: 0 };
// The one rank part of a TP 1 worker, as it travels (discovery never touches the memory it describes).
const banks = layoutRankBanks(geometry, parallel, { address: 0x7f00_0000_0000n, blocks: 4 });
const part = parseRankPart({
  version: 1,
  workerId: 'decode-0',
  incarnation: 'decode-0-a',
  role: 'decode',
  geometry,
  parallel,
  banks: banks.map((bank) => ({
    ...bank,
    address: String(bank.address),
    bytes: String(bank.bytes),
    blockStride: String(bank.blockStride),
  })),
  transport: {
    agentName: 'decode-0-tp0-pp0',
    generation: 1,
    metadata: Buffer.from('transport blob').toString('base64'),
  },
});
const store = new MemoryDiscoveryStore();
const seen: string[] = [];
const readiness = await watchWorkerReadiness(store, 'decode-0', {
  onChange: (change) => seen.push(change.ready ? 'ready' : 'not ready'),
});
const publication = await startRankPublication(store, [part], { leaseTtlMs: 10_000 });
await readiness.settled();
const published = (await store.list('kvreuse/workers/decode-0/incarnations/')).entries.map((entry) => entry.key);
await publication.withdraw();
await readiness.settled();
await readiness.close();
await store.close();
console.log(JSON.stringify({ published, seen }));
