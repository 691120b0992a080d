// Pins as the endpoint processes count them: no worker publishes its pins to discovery, so inspect
// reads them where they are, from the `kvreuse_pins_held` gauge at each process's /metrics.
import { MetricsUnavailableError } from './errors.js';

/** The pins one endpoint process reports: granted to readers (serving) and held at sources (holding). */
export interface ProcessPins {
  readonly url: string;
  readonly serving: number;
  readonly holding: number;
}

/** As long as discovery's request deadline: a frozen process fails the command, never hangs it. */
const metricsDeadlineMs = 5000;
const pinsHeldLine = /^kvreuse_pins_held\{([^}]*)\}\s+(\S+)/;
const sideLabel = /(?:^|,)side="(serve|pull)"/;

/** The pins a Prometheus text exposition reports; `undefined` when it has no `kvreuse_pins_held` gauge. */
export function pinsFromMetrics(url: string, text: string): ProcessPins | undefined {
  const held = { serve: 0, pull: 0 };
  let found = false;
  for (const line of text.split('\n')) {
    const match = pinsHeldLine.exec(line);
    const side = match === null ? null : sideLabel.exec(match[1]!);
    if (match === null || side === null) continue;
    found = true;
    held[side[1] as 'serve' | 'pull'] += Number(match[2]);
  }
  return found ? { url, serving: held.serve, holding: held.pull } : undefined;
}

/** Reads the pins of the endpoint process serving its metrics at `url`; `MetricsUnavailableError` when it cannot. */
export async function readProcessPins(url: string): Promise<ProcessPins> {
  let text: string;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(metricsDeadlineMs) });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    text = await response.text();
  } catch (error) {
    const cause =
      error instanceof Error && error.cause instanceof Error
        ? `${error.message}: ${error.cause.message}`
        : (error as Error).message;
    throw new MetricsUnavailableError(url, cause, { cause: error });
  }
  const pins = pinsFromMetrics(url, text);
  if (pins === undefined)
    throw new MetricsUnavailableError(url, 'no kvreuse_pins_held gauge there (not the metrics of a kvreuse endpoint)');
  return pins;
}
