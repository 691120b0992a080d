import { type DiscoveryStore, watchWorkerReadiness, type WorkerReadiness } from '@kvreuse/discovery';

/** Resolves with the worker's readiness once it is ready in discovery. */
export async function whenReady(
  store: DiscoveryStore,
  workerId: string,
): Promise<Extract<WorkerReadiness, { ready: true }>> {
  let ready: (readiness: Extract<WorkerReadiness, { ready: true }>) => void = () => undefined;
  const readiness = new Promise<Extract<WorkerReadiness, { ready: true }>>((resolve) => (ready = resolve));
  const watch = await watchWorkerReadiness(store, workerId, { onChange: (change) => change.ready && ready(change) });
  if (watch.current.ready) ready(watch.current);
  const worker = await readiness;
  await watch.close();
  return worker;
}
