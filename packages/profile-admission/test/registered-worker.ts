import {
  assembleWorker,
  type Geometry,
  layoutRankBanks,
  type RankPart,
  type Role,
  type Worker,
} from '@kvreuse/descriptors';
import type { Agent, Allocation, Transport } from '@kvreuse/native-bindings';
import { ClusterSecret, type DiscoveryStore, startRankPublication } from '@kvreuse/discovery';
import {
  Bank,
  buildRankPart,
  kvreuseOwner,
  type RegisteredRank,
  registerRank,
  releaseRank,
  transportMetadataOf,
} from '@kvreuse/registry';

export interface HostWorkerShape {
  readonly workerId: string;
  readonly role: Role;
  readonly geometry: Geometry;
  readonly tpSize: number;
  /** Blocks per bank. */
  readonly blocks: number;
}

/** A worker whose parts are published in discovery, and how it goes away again. */
export interface PublishedWorker {
  readonly worker: Worker;
  /** Withdraws the parts; for a host worker, then hands every bank back, frees the memory and closes the agents. */
  close(): Promise<void>;
}

const leaseTtlMs = 60_000;

/**
 * What a host-memory worker does to become ready, for real: per rank a loopback agent, kvreuse-owned
 * native allocations adopted as banks and registered in one transaction, then every part published
 * (the incarnation claims its epoch, the parts go out under a renewed lease).
 */
export async function publishHostWorker(
  transport: Transport,
  shape: HostWorkerShape,
  store: DiscoveryStore,
): Promise<PublishedWorker> {
  const { workerId, role, geometry, tpSize, blocks } = shape;
  const identity = { workerId, incarnation: 'inc-1', role, geometry, tpSize, ppSize: 1, dpRank: 0 };
  const agents: Agent[] = [];
  const allocations: Allocation[] = [];
  const ranks: RegisteredRank[] = [];
  const release = async (): Promise<void> => {
    for (const rank of ranks) await releaseRank(rank);
    for (const allocation of allocations.filter((each) => each.isOpen)) await allocation.free();
    for (const agent of agents) await agent.close();
  };
  try {
    for (let tpRank = 0; tpRank < tpSize; tpRank++) {
      const agent = await transport.createAgent({
        name: `${workerId}-tp${tpRank}-${process.pid}`,
        backend: 'loopback',
      });
      agents.push(agent);
      const layout = layoutRankBanks(geometry, { tpRank, tpSize, ppRank: 0, ppSize: 1 }, { address: 0n, blocks });
      const owned = await Promise.all(
        layout.map(async (spec) => ({ spec, allocation: await agent.allocate(spec.bytes) })),
      );
      allocations.push(...owned.map(({ allocation }) => allocation));
      const banks = owned.map(({ spec, allocation }, index) =>
        Bank.adopt({ ...spec, tpRank, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation)),
      );
      ranks.push(await registerRank({ agent, banks }));
    }
    const parts = ranks.map((rank, tpRank) =>
      buildRankPart(
        identity,
        rank,
        transportMetadataOf(agents[tpRank]!, ClusterSecret.ofThisProcess(), { ...identity, ...rank }),
      ),
    );
    const published = await publishParts(store, parts);
    return { worker: published.worker, close: () => published.close().then(release) };
  } catch (error) {
    await release();
    throw error;
  }
}

/** Publishes parts as a worker does; parts with no memory behind them stand for what this machine cannot register (vram). */
export async function publishParts(store: DiscoveryStore, parts: readonly RankPart[]): Promise<PublishedWorker> {
  const assembled = assembleWorker(parts);
  if (!assembled.complete) throw new Error(`the parts of ${parts[0]?.workerId} are not a complete worker`);
  const publication = await startRankPublication(store, parts, { leaseTtlMs });
  return { worker: assembled.worker, close: () => publication.withdraw() };
}
