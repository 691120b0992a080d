// Consecutive free TCP ports for the ranks' metrics listeners (`endpoint.metricsPort` is the first rank's,
// each next rank takes the next port).
import { createServer } from 'node:net';
import { ChaosSetupError } from './errors.js';

/** Whether `port` can be listened on at 127.0.0.1 right now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** The first of `count` consecutive ports free right now, tried from random starts in 20000–59999; ChaosSetupError for run `seed` if none. */
export async function freePortRun(seed: number, count: number): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const first = 20_000 + Math.floor(Math.random() * 40_000);
    let free = true;
    for (let port = first; free && port < first + count; port++) free = await portIsFree(port);
    if (free) return first;
  }
  throw new ChaosSetupError(seed, 'metrics ports', `no ${count} consecutive free ports found in 100 attempts`);
}
