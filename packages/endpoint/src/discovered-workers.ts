// Workers and peers as discovery publishes them: one incarnation's rank parts assembled into a
// worker, and a rank's agent loaded as a peer from the metadata its rank part carries.
import { assembleWorker, type RankPart, type Worker } from '@kvreuse/descriptors';
import type { Agent, Peer } from '@kvreuse/native-bindings';
import { decodeRankPartRecord, type DiscoveryStore, incarnationPartsPrefix, type WorkerIncarnation } from '@kvreuse/registry';

/** The incarnation's worker, assembled from its published rank parts; undefined while incomplete or absent. */
export async function readWorkerIncarnation(store: DiscoveryStore, worker: WorkerIncarnation, keyPrefix?: string): Promise<Worker | undefined> {
  const { entries } = await store.list(incarnationPartsPrefix(worker, keyPrefix));
  if (entries.length === 0) return undefined;
  const assembled = assembleWorker(entries.map((entry) => decodeRankPartRecord(entry.key, entry.value, keyPrefix).part));
  return assembled.complete ? assembled.worker : undefined;
}

/** Loads (or refreshes: a newer generation replaces the older one) the agent of `part` as a peer of `agent`. */
export function loadRankPeer(agent: Pick<Agent, 'loadPeer'>, part: RankPart): Peer {
  return agent.loadPeer(Buffer.from(part.transport.metadata, 'base64'));
}
