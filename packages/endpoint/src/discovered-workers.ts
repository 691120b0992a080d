// Workers as discovery publishes them: one incarnation's rank parts assembled into a worker.
import { assembleWorker, type Worker } from '@kvreuse/descriptors';
import { decodeRankPartRecord, type DiscoveryStore, incarnationPartsPrefix, type WorkerIncarnation } from '@kvreuse/discovery';

/** The incarnation's worker, assembled from its published rank parts; undefined while incomplete or absent. */
export async function readWorkerIncarnation(store: DiscoveryStore, worker: WorkerIncarnation, keyPrefix?: string): Promise<Worker | undefined> {
  const { entries } = await store.list(incarnationPartsPrefix(worker, keyPrefix));
  if (entries.length === 0) return undefined;
  const assembled = assembleWorker(entries.map((entry) => decodeRankPartRecord(entry.key, entry.value, keyPrefix).part));
  return assembled.complete ? assembled.worker : undefined;
}
