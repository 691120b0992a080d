// The endpoint's Prometheus metrics, and the optional HTTP listener that serves them at /metrics.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { messageOf } from '@kvreuse/errors';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerDefaultMetrics } from '@kvreuse/router';
import { EndpointOptionError, MetricsPortError } from './errors.js';
import { isListenHost } from './settings.js';
import { type EndpointState, endpointStates } from './lifecycle.js';
import { type PinMessageRefusal, pinMessageRefusals } from './pin-auth.js';

export type TransferSide = 'pull' | 'serve';

export interface TransferRecord {
  readonly side: TransferSide;
  readonly blocks: number;
  readonly bytes: number;
  readonly durationMs: number;
  /** `gpu` or `host`: the tier the blocks were read from. */
  readonly tier: string;
  /** `same-host` or `network`. */
  readonly linkClass: string;
}

export interface BankCounts {
  readonly registered: number;
  readonly retained: number;
  readonly quarantined: number;
}

export interface EndpointMetricsOptions {
  /**
   * Where the metrics are registered; by default a new registry of their own, which also holds the
   * process's default metrics (`process_*`, `nodejs_*`). A registry given keeps whatever it holds.
   */
  readonly registry?: Registry;
  /** Labels every metric carries, e.g. `{ worker: 'decode-0', rank: '1' }`. */
  readonly labels?: Readonly<Record<string, string>>;
}

export interface MetricsListener {
  /** The address it listens on, as given. */
  readonly host: string;
  /** The port it listens on (the one the system picked when asked for 0). */
  readonly port: number;
  /** Where a scraper reads the metrics: `http://host:port/metrics` (an IPv6 host in brackets). */
  readonly url: string;
  close(): Promise<void>;
}

/** The version of this package, as `kvreuse_build_info` says it. */
const endpointVersion = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/**
 * `kvreuse_build_info`, and in a registry of the endpoint's own the process's default metrics (`process_*`,
 * `nodejs_*`), collected once per process (`registerDefaultMetrics` of @kvreuse/router).
 */
function registerProcessMetrics(registry: Registry, own: boolean): void {
  if (own) registerDefaultMetrics(registry);
  new Gauge({
    name: 'kvreuse_build_info',
    help: 'Always 1; its labels say which kvreuse endpoint and Node.js this process runs.',
    labelNames: ['version', 'nodejs'],
    registers: [registry],
  }).set({ version: endpointVersion, nodejs: process.version }, 1);
}

const nonNegative = (value: number): boolean => Number.isFinite(value) && value >= 0;

// Transfer times from a fraction of a millisecond (a few blocks over shared memory) to tens of seconds (tcp).
const durationBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

function checkDefaultLabels(labels: EndpointMetricsOptions['labels']): void {
  for (const [name, value] of Object.entries(labels ?? {})) {
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name) || name.startsWith('__'))
      throw new EndpointOptionError(
        `metrics.labels.${name}`,
        value,
        'a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)',
      );
    if (typeof value !== 'string') throw new EndpointOptionError(`metrics.labels.${name}`, value, 'a string');
  }
}

export class EndpointMetrics {
  readonly registry: Registry;
  readonly #transfers: Counter<'side' | 'tier' | 'link_class'>;
  readonly #bytes: Counter<'side' | 'tier' | 'link_class'>;
  readonly #blocks: Counter<'side' | 'tier' | 'link_class'>;
  readonly #duration: Histogram<'side' | 'tier' | 'link_class'>;
  readonly #failures: Counter<'side' | 'code'>;
  readonly #pinsHeld: Gauge<'side'>;
  readonly #pinMessagesRefused: Counter<'reason'>;
  readonly #banks: Gauge<'state'>;
  readonly #state: Gauge<'state'>;

  constructor(options: EndpointMetricsOptions = {}) {
    if (typeof options !== 'object' || options === null)
      throw new EndpointOptionError('metrics', options, 'an options object');
    if (options.registry !== undefined && !(options.registry instanceof Registry)) {
      throw new EndpointOptionError(
        'metrics.registry',
        options.registry,
        'a prom-client Registry (of the prom-client kvreuse depends on)',
      );
    }
    checkDefaultLabels(options.labels);
    this.registry = options.registry ?? new Registry();
    if (options.labels !== undefined) this.registry.setDefaultLabels({ ...options.labels });
    const registers = [this.registry];
    registerProcessMetrics(this.registry, options.registry === undefined);
    const transferLabels = ['side', 'tier', 'link_class'] as const;
    this.#transfers = new Counter({
      name: 'kvreuse_transfers_total',
      help: 'Transfers that completed and verified, by side (pull: this process read; serve: others read from it).',
      labelNames: transferLabels,
      registers,
    });
    this.#bytes = new Counter({
      name: 'kvreuse_transfer_bytes_total',
      help: 'Bytes moved by completed transfers.',
      labelNames: transferLabels,
      registers,
    });
    this.#blocks = new Counter({
      name: 'kvreuse_transfer_blocks_total',
      help: 'KV blocks moved by completed transfers.',
      labelNames: transferLabels,
      registers,
    });
    this.#duration = new Histogram({
      name: 'kvreuse_transfer_duration_seconds',
      help: 'Time from the first post to the last verified block of a transfer.',
      labelNames: transferLabels,
      buckets: durationBuckets,
      registers,
    });
    this.#failures = new Counter({
      name: 'kvreuse_transfer_failures_total',
      help: 'Transfers that failed, by side and error code.',
      labelNames: ['side', 'code'],
      registers,
    });
    this.#pinsHeld = new Gauge({
      name: 'kvreuse_pins_held',
      help: 'Pins held now: granted by this process (serve) or held by it at sources (pull).',
      labelNames: ['side'],
      registers,
    });
    this.#pinMessagesRefused = new Counter({
      name: 'kvreuse_pin_messages_refused_total',
      help: "Pin messages this process refused, by reason: unauthenticated (no valid tag under the cluster secret), malformed, not-reader (a renewal or release from another agent than the pin's reader), not-source (an answer, renewal confirmation, release acknowledgement or revocation from another agent than the pin's source), replayed.",
      labelNames: ['reason'],
      registers,
    });
    this.#banks = new Gauge({
      name: 'kvreuse_banks',
      help: 'Banks of this process by state: registered, retained (held back from hand-back), quarantined (an unfinished operation touches them).',
      labelNames: ['state'],
      registers,
    });
    this.#state = new Gauge({
      name: 'kvreuse_endpoint_state',
      help: 'The endpoint lifecycle state: 1 for the current state, 0 for the others (ready = serving).',
      labelNames: ['state'],
      registers,
    });
    this.#zero();
  }

  /** Every series at its start, so that each is scraped from the first. */
  #zero(): void {
    for (const side of ['pull', 'serve'] as const) this.#pinsHeld.set({ side }, 0);
    for (const reason of pinMessageRefusals) this.#pinMessagesRefused.inc({ reason }, 0);
    this.banks({ registered: 0, retained: 0, quarantined: 0 });
    this.state('created');
  }

  transferCompleted(record: TransferRecord): void {
    for (const field of ['blocks', 'bytes', 'durationMs'] as const) {
      if (!nonNegative(record[field]))
        throw new EndpointOptionError(`transfer.${field}`, record[field], 'a finite number ≥ 0');
    }
    const labels = { side: record.side, tier: record.tier, link_class: record.linkClass };
    this.#transfers.inc(labels);
    this.#bytes.inc(labels, record.bytes);
    this.#blocks.inc(labels, record.blocks);
    this.#duration.observe(labels, record.durationMs / 1000);
  }

  transferFailed(side: TransferSide, code: string): void {
    this.#failures.inc({ side, code });
  }

  pinsHeld(side: TransferSide, count: number): void {
    if (!Number.isInteger(count) || count < 0)
      throw new EndpointOptionError(`pinsHeld.${side}`, count, 'a whole number ≥ 0');
    this.#pinsHeld.set({ side }, count);
  }

  pinMessageRefused(reason: PinMessageRefusal): void {
    if (!pinMessageRefusals.includes(reason))
      throw new EndpointOptionError('pinMessageRefused', reason, `one of ${pinMessageRefusals.join(', ')}`);
    this.#pinMessagesRefused.inc({ reason });
  }

  banks(counts: BankCounts): void {
    for (const state of ['registered', 'retained', 'quarantined'] as const) {
      if (!Number.isInteger(counts[state]) || counts[state] < 0)
        throw new EndpointOptionError(`banks.${state}`, counts[state], 'a whole number ≥ 0');
      this.#banks.set({ state }, counts[state]);
    }
  }

  state(current: EndpointState): void {
    if (!endpointStates.includes(current))
      throw new EndpointOptionError('state', current, `one of ${endpointStates.join(', ')}`);
    for (const state of endpointStates) this.#state.set({ state }, state === current ? 1 : 0);
  }

  /** The metrics in Prometheus' text format. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /**
   * Serves the metrics at `GET /metrics` on `host` (127.0.0.1 unless given) and `port` (0 picks a free
   * one), as `listenMetrics` does.
   */
  listen(port: number, host = '127.0.0.1'): Promise<MetricsListener> {
    return listenMetrics(this.registry, port, host);
  }
}

/**
 * Serves `registry`'s metrics at `GET /metrics` on `host` (127.0.0.1 unless given) and `port` (0 picks a
 * free one); resolves once listening. Anything else gets 404. A port that is no TCP port, or a host that is
 * no IP address or host name, rejects with `EndpointOptionError` before listening. A port in use (or an
 * address that cannot be listened on) rejects with `MetricsPortError` naming the host, the port and the
 * system's code. Any
 * registry: an endpoint's (`EndpointMetrics.listen`), a router's (`RouterMetrics` of @kvreuse/router), or one of both.
 */
export async function listenMetrics(registry: Registry, port: number, host = '127.0.0.1'): Promise<MetricsListener> {
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new EndpointOptionError('metrics.port', port, 'a whole number from 0 to 65535');
  // An empty host would have the server listen on every interface.
  if (typeof host !== 'string' || !isListenHost(host))
    throw new EndpointOptionError('metrics.host', host, 'an IPv4 or IPv6 address or a host name');
  const server: Server = createServer((request, response) => {
    if (request.method !== 'GET' || request.url?.split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (body) => response.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (error: unknown) =>
        response.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${messageOf(error)}\n`),
    );
  });
  return new Promise((resolve, reject) => {
    const refused = (error: NodeJS.ErrnoException): void =>
      reject(new MetricsPortError(host, port, error.code ?? 'UNKNOWN', { cause: error }));
    server.once('error', refused);
    server.listen(port, host, () => {
      server.off('error', refused);
      const address = server.address();
      const listening = typeof address === 'object' && address !== null ? address.port : port;
      resolve({
        host,
        port: listening,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${listening}/metrics`,
        close: () =>
          new Promise<void>((done, fail) => server.close((error) => (error === undefined ? done() : fail(error)))),
      });
    });
  });
}
