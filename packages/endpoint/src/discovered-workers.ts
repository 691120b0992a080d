// Workers as discovery publishes them: one incarnation's rank parts assembled into a worker, and the
// readiness of the workers a rank transfers with, followed from their first transfer on.
import { assembleWorker, type Worker } from '@kvreuse/descriptors';
import {
  decodeRankPartRecord,
  type DiscoveryStore,
  incarnationPartsPrefix,
  type ReadinessGate,
  watchWorkerReadiness,
  type WorkerIncarnation,
  type WorkerReadiness,
  type WorkerReadinessWatch,
} from '@kvreuse/discovery';

/** The incarnation's worker, assembled from its published rank parts; undefined while incomplete or absent. */
export async function readWorkerIncarnation(
  store: DiscoveryStore,
  worker: WorkerIncarnation,
  keyPrefix?: string,
): Promise<Worker | undefined> {
  const { entries } = await store.list(incarnationPartsPrefix(worker, keyPrefix));
  if (entries.length === 0) return undefined;
  const assembled = assembleWorker(
    entries.map((entry) => decodeRankPartRecord(entry.key, entry.value, keyPrefix).part),
  );
  return assembled.complete ? assembled.worker : undefined;
}

export interface WorkerWatchesOptions {
  readonly admissionGate?: ReadinessGate;
  readonly keyPrefix?: string;
  /** Told each incarnation a followed worker is ready as. */
  readonly onReady?: (worker: WorkerIncarnation) => void;
}

/** Readiness watches of the workers a rank transfers with, by worker id: opened at the first transfer, closed at drain. */
export class WorkerWatches {
  readonly #discovery: DiscoveryStore;
  readonly #options: WorkerWatchesOptions;
  readonly #watches = new Map<string, Promise<WorkerReadinessWatch>>();

  constructor(discovery: DiscoveryStore, options: WorkerWatchesOptions) {
    this.#discovery = discovery;
    this.#options = options;
  }

  /** The worker's readiness, once its watch has settled. */
  async readiness(workerId: string): Promise<WorkerReadiness> {
    let watching = this.#watches.get(workerId);
    if (watching === undefined) {
      const { admissionGate, keyPrefix, onReady } = this.#options;
      watching = watchWorkerReadiness(this.#discovery, workerId, {
        onChange: (readiness) => {
          if (readiness.ready) onReady?.(readiness);
        },
        ...(admissionGate === undefined ? {} : { admissionGate }),
        ...(keyPrefix === undefined ? {} : { keyPrefix }),
      });
      this.#watches.set(workerId, watching);
      watching.catch(() => this.#watches.delete(workerId));
    }
    const watch = await watching;
    await watch.settled();
    return watch.current;
  }

  /** Stops following every worker. */
  async close(): Promise<void> {
    const watches = await Promise.allSettled(this.#watches.values());
    this.#watches.clear();
    for (const watch of watches) if (watch.status === 'fulfilled') await watch.value.close();
  }
}
