// Consecutive ports for the ranks' metrics listeners (`endpoint.metricsPort` is the first rank's, each next rank
// takes the next port): below the kernel's ephemeral range and claimed for this run, so that nothing else is
// handed one of them before the ranks listen.
import { reservePorts } from '@kvreuse-internal/test-support';
import { ChaosSetupError } from './errors.js';

/** The first of `count` consecutive free ports; ChaosSetupError for run `seed` if none. */
export async function freePortRun(seed: number, count: number): Promise<number> {
  try {
    return await reservePorts(count);
  } catch (error) {
    throw new ChaosSetupError(seed, 'metrics ports', (error as Error).message);
  }
}
