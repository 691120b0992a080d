import { layoutRankBanks, referenceGeometries } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import { ClusterSecret, MemoryDiscoveryStore, startRankPublication } from '@kvreuse/discovery';
import { Bank, buildRankPart, kvreuseOwner, registerRank, releaseRank, transportMetadataOf } from '@kvreuse/registry';

const geometry = referenceGeometries['qwen3-0.6b'];
const worker = {
  workerId: 'decode-0',
  incarnation: 'decode-0-a',
  role: 'decode',
  geometry,
  tpSize: 1,
  ppSize: 1,
  dpRank: 0,
} as const;
const agent = await loadTransport().createAgent({ name: 'registry-user', backend: 'loopback' });
const layout = layoutRankBanks(geometry, { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 }, { address: 0n, blocks: 4 });
const allocations = await Promise.all(layout.map((bank) => agent.allocate(bank.bytes)));
const banks = layout.map((bank, index) =>
  Bank.adopt(
    { ...bank, tpRank: 0, ppRank: 0, index, address: allocations[index]!.address },
    kvreuseOwner(allocations[index]!),
  ),
);
const rank = await registerRank({ agent, banks });
const store = new MemoryDiscoveryStore();
const publication = await startRankPublication(
  store,
  [
    buildRankPart(
      worker,
      rank,
      transportMetadataOf(agent, ClusterSecret.ofThisProcess(), { ...worker, tpRank: 0, ppRank: 0 }),
    ),
  ],
  { leaseTtlMs: 10_000 },
);
const published = (await store.list('kvreuse/workers/decode-0/incarnations/')).entries.map((entry) => entry.key);
const registered = agent.counters().liveRegistrations;
await publication.withdraw();
await releaseRank(rank);
await agent.close();
await store.close();
console.log(
  JSON.stringify({ banks: banks.length, registered, published, states: [...new Set(banks.map((bank) => bank.state))] }),
);
