// A worker of the demo as discovery holds it, once every rank of it is published.
import type { Worker } from '@kvreuse/descriptors';
import { type DiscoveryStore, type ReadinessGate, watchWorkerReadiness } from '@kvreuse/discovery';
import { DemoProcessError } from '../errors.js';

/**
 * The worker's descriptor from its published rank parts; DemoProcessError naming why when it is not ready.
 * A worker with vram banks is ready only through `admissionGate` (the declared profile's).
 */
export async function readyWorker(
  discovery: DiscoveryStore,
  workerId: string,
  admissionGate?: ReadinessGate,
): Promise<Worker> {
  const watch = await watchWorkerReadiness(discovery, workerId, {
    onChange: () => undefined,
    ...(admissionGate === undefined ? {} : { admissionGate }),
  });
  const readiness = watch.current;
  await watch.close();
  if (!readiness.ready)
    throw new DemoProcessError(
      workerId,
      `is not ready: ${readiness.reasons.map((reason) => reason.message).join('; ')}`,
      [],
    );
  return readiness.worker;
}
