import { type Geometry, layoutRankBanks } from '@kvreuse/descriptors';
import type { Agent, Allocation, Backend, Transport } from '@kvreuse/native-bindings';
import {
  claimIncarnationEpoch,
  ClusterSecret,
  type DiscoveryStore,
  type LeaseId,
  publishRankParts,
} from '@kvreuse/discovery';
import {
  Bank,
  buildRankPart,
  kvreuseOwner,
  type RegisteredRank,
  registerRank,
  releaseRank,
  transportMetadataOf,
  type WorkerIdentity,
} from '../../src/index.js';

export interface WorkerSetup {
  readonly transport: Transport;
  readonly backend: Backend;
  readonly workerId: string;
  readonly incarnation: string;
  readonly geometry: Geometry;
  readonly tpSize: number;
  /** Blocks per bank. */
  readonly blocks: number;
  /** One bank per layer holding both planes this far apart (vLLM's layout), instead of one per (layer, plane). */
  readonly planeStride?: number;
}

export interface PreparedRank {
  readonly agent: Agent;
  readonly banks: Bank[];
  readonly allocations: Allocation[];
}

/** What happens before a rank registers: its agent (one per rank, as one process per rank would have) and its kvreuse-owned banks. */
export async function prepareRank(setup: WorkerSetup, tpRank: number): Promise<PreparedRank> {
  const agent = await setup.transport.createAgent({
    name: `${setup.workerId}-${setup.incarnation}-tp${tpRank}`,
    backend: setup.backend,
  });
  const layout = layoutRankBanks(
    setup.geometry,
    { tpRank, tpSize: setup.tpSize, ppRank: 0, ppSize: 1 },
    {
      address: 0n,
      blocks: setup.blocks,
      ...(setup.planeStride === undefined ? {} : { planeStride: setup.planeStride }),
    },
  );
  const allocations = await Promise.all(layout.map((bank) => agent.allocate(bank.bytes)));
  const banks = layout.map((bank, index) =>
    Bank.adopt(
      { ...bank, tpRank, ppRank: 0, index, address: allocations[index]!.address },
      kvreuseOwner(allocations[index]!),
    ),
  );
  return { agent, banks, allocations };
}

export function prepareWorker(setup: WorkerSetup): Promise<PreparedRank[]> {
  return Promise.all(Array.from({ length: setup.tpSize }, (_, tpRank) => prepareRank(setup, tpRank)));
}

/** The identity a rank of this worker publishes. */
export function identityOf(setup: WorkerSetup): WorkerIdentity {
  return { ...setup, role: 'decode', ppSize: 1, dpRank: 0 };
}

/** Registers every rank, builds its part and publishes them all under one lease; what a worker does to become ready. */
export async function registerAndPublish(
  setup: WorkerSetup,
  prepared: readonly PreparedRank[],
  store: DiscoveryStore,
  lease: LeaseId,
): Promise<RegisteredRank[]> {
  const ranks: RegisteredRank[] = [];
  for (const { agent, banks } of prepared) ranks.push(await registerRank({ agent, banks }));
  const parts = ranks.map((rank, index) =>
    buildRankPart(
      identityOf(setup),
      rank,
      transportMetadataOf(prepared[index]!.agent, ClusterSecret.ofThisProcess(), { ...setup, ...rank }),
    ),
  );
  const { epoch } = await claimIncarnationEpoch(store, setup);
  await publishRankParts(store, parts, { lease, epoch });
  return ranks;
}

/** Hands every bank back (freeing kvreuse's memory) and closes the agents. */
export async function tearDownWorker(
  prepared: readonly PreparedRank[],
  ranks: readonly RegisteredRank[],
): Promise<void> {
  for (const rank of ranks) await releaseRank(rank);
  for (const { agent, allocations } of prepared) {
    for (const allocation of allocations) if (allocation.isOpen) await allocation.free();
    await agent.close();
  }
}
