import { watchWorkerReadiness } from '@kvreuse/registry';
import { DemoProcessError } from '../errors.js';
/** The worker's descriptor from its published rank parts; DemoProcessError naming why when it is not ready. */
export async function readyWorker(discovery, workerId) {
    const watch = await watchWorkerReadiness(discovery, workerId, { onChange: () => undefined });
    const readiness = watch.current;
    await watch.close();
    if (!readiness.ready)
        throw new DemoProcessError(workerId, `is not ready: ${readiness.reasons.map((reason) => reason.message).join('; ')}`, []);
    return readiness.worker;
}
