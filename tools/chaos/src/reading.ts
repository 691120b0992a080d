// When the prefill is reading: its endpoint's `kvreuse_pins_held{side="pull"}` is set once its pins are
// held, in the same synchronous step as its reads are posted, and goes back to 0 when the pull ends (its
// reads quiescent or quarantined, then verified). So a scrape that sees it above 0 lands after the posts
// and before the pull's end; on a 42-block pull over tcp the reads are nearly all of that window, on a
// 4-block one they are over before a stop lands.
import { ChaosInvariantError } from './errors.js';

const pullPins = /^kvreuse_pins_held\{[^}]*\bside="pull"[^}]*\} (\d+)$/m;

/** The pins the prefill holds for a pull, from its metrics text; ChaosInvariantError for run `seed` when the sample is missing. */
export function pullPinsHeld(seed: number, metricsText: string): number {
  const found = pullPins.exec(metricsText);
  if (found === null)
    throw new ChaosInvariantError(
      seed,
      'the prefill serves its metrics',
      'its metrics have no kvreuse_pins_held{side="pull"} sample',
    );
  return Number(found[1]);
}

/**
 * Resolves true once a scrape of `metricsUrl` shows the prefill holding pull pins (its reads are in
 * flight), false if `pullEnded` settles first (the pull never got to read).
 */
export async function untilReading(seed: number, metricsUrl: string, pullEnded: Promise<unknown>): Promise<boolean> {
  let ended = false;
  const end = (): void => {
    ended = true;
  };
  pullEnded.then(end, end);
  while (!ended) {
    const response = await fetch(metricsUrl);
    if (pullPinsHeld(seed, await response.text()) > 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return false;
}
