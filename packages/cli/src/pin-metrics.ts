// Pins as the endpoint processes count them: no worker publishes its pins to discovery, so inspect
// reads them where they are, from the `kvreuse_pins_held` gauge at each process's /metrics.
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
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

/**
 * The body `url` answers with (a 2xx status) within the deadline. Read with node:http rather than
 * fetch, which refuses ports such as 6000 (the WHATWG "bad ports") that a metrics server may listen on.
 */
function readText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const get = new URL(url).protocol === 'https:' ? httpsGet : httpGet;
    // A connection of its own, closed with the answer: no pooled socket outlives the command.
    const request = get(url, { agent: false }, (response) => {
      const status = response.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        reject(new Error(`HTTP ${status}`));
        request.destroy();
        return;
      }
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve(text));
      response.on('error', reject);
      response.on('close', () => reject(new Error('the connection closed before the whole answer')));
    });
    const deadline = setTimeout(() => {
      reject(new Error(`no answer within ${metricsDeadlineMs / 1000} s`));
      request.destroy();
    }, metricsDeadlineMs);
    request.on('error', reject);
    request.on('close', () => clearTimeout(deadline));
  });
}

/** Reads the pins of the endpoint process serving its metrics at `url`; `MetricsUnavailableError` when it cannot. */
export async function readProcessPins(url: string): Promise<ProcessPins> {
  let text: string;
  try {
    text = await readText(url);
  } catch (error) {
    throw new MetricsUnavailableError(url, (error as Error).message, { cause: error });
  }
  const pins = pinsFromMetrics(url, text);
  if (pins === undefined)
    throw new MetricsUnavailableError(url, 'no kvreuse_pins_held gauge there (not the metrics of a kvreuse endpoint)');
  return pins;
}
