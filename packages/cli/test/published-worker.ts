// A real worker published to real discovery, as a decode worker's process does it: loopback agents,
// kvreuse-owned banks registered per rank, rank parts under a lease, and a retained inventory batch.
import { layoutRankBanks, referenceGeometries } from '@kvreuse/descriptors';
import { type Agent, type Allocation, loadTransport } from '@kvreuse/native-bindings';
import { claimIncarnationEpoch, ClusterSecret, type DiscoveryStore, publishRankParts } from '@kvreuse/discovery';
import { type InventoryEvent, InventoryPublisher } from '@kvreuse/inventory';
import {
  Bank,
  buildRankPart,
  kvreuseOwner,
  type RegisteredRank,
  registerRank,
  releaseRank,
  transportMetadataOf,
} from '@kvreuse/registry';

const transport = loadTransport();

export interface PublishedWorker {
  /** The length of each published rank's metadata blob (its peer's address and keys) as its agent exports it, by rank. */
  readonly peerMetadataBytes: readonly number[];
  /** The length of each published rank's signed transport metadata (the blob in its signature envelope), by rank. */
  readonly signedMetadataBytes: readonly number[];
  withdraw(): Promise<void>;
}

export interface WorkerPublication {
  readonly workerId: string;
  /** Ranks of a TP 2 Qwen3-0.6B decode worker that register and publish (both by default). */
  readonly tpRanks?: readonly number[];
  readonly inventory?: readonly InventoryEvent[];
  /** The machine its rank parts name; none by default. */
  readonly host?: string;
}

export async function publishWorker(
  store: DiscoveryStore,
  { workerId, tpRanks = [0, 1], inventory, host }: WorkerPublication,
): Promise<PublishedWorker> {
  const geometry = referenceGeometries['qwen3-0.6b'];
  const identity = {
    workerId,
    incarnation: 'inc-1',
    role: 'decode',
    geometry,
    tpSize: 2,
    ppSize: 1,
    dpRank: 0,
  } as const;
  const agents: Agent[] = [];
  const allocations: Allocation[] = [];
  const ranks: RegisteredRank[] = [];
  for (const tpRank of tpRanks) {
    const agent = await transport.createAgent({ name: `${workerId}-tp${tpRank}-${process.pid}`, backend: 'loopback' });
    agents.push(agent);
    const layout = layoutRankBanks(geometry, { tpRank, tpSize: 2, ppRank: 0, ppSize: 1 }, { address: 0n, blocks: 1 });
    const banks: Bank[] = [];
    for (const [index, bank] of layout.entries()) {
      const allocation = await agent.allocate(bank.bytes);
      allocations.push(allocation);
      banks.push(
        Bank.adopt({ ...bank, tpRank, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation)),
      );
    }
    ranks.push(await registerRank({ agent, banks }));
  }
  const lease = await store.grantLease(60_000);
  const { epoch } = await claimIncarnationEpoch(store, identity);
  const metadata = agents.map((agent, index) =>
    transportMetadataOf(agent, ClusterSecret.ofThisProcess(), { ...identity, ...ranks[index]! }),
  );
  const parts = ranks.map((rank, index) =>
    buildRankPart(identity, rank, metadata[index]!, host === undefined ? {} : { host }),
  );
  await publishRankParts(store, parts, { lease: lease.id, epoch });
  const publisher = new InventoryPublisher(store, {
    workerId,
    incarnation: identity.incarnation,
    epoch,
    lease: lease.id,
  });
  if (inventory !== undefined) await publisher.publish(inventory);
  return {
    peerMetadataBytes: agents.map((agent) => agent.metadata().length),
    signedMetadataBytes: metadata.map((entry) => entry.metadata.length),
    async withdraw() {
      await publisher.withdraw();
      await store.revokeLease(lease.id);
      for (const rank of ranks) await releaseRank(rank);
      for (const allocation of allocations) if (allocation.isOpen) await allocation.free();
      for (const agent of agents) await agent.close();
    },
  };
}
