// The router's Prometheus metrics: what it decided and why. The process that runs the router serves them
// (the demo's parent beside its ranks' endpoints, each of which serves its transfers and pins).
import { collectDefaultMetrics, Counter, type Metric, Registry } from 'prom-client';
import { type DecisionReason, decisionReasons, type RouteDecision } from './decide.js';
import { calibrationClockRefusals, isObject, RouterOptionError } from './errors.js';

export interface RouterMetricsOptions {
  /**
   * Where the metrics are registered; by default a new registry of their own, which also holds the
   * process's default metrics (`process_*`, `nodejs_*`). A registry given keeps whatever it holds.
   */
  readonly registry?: Registry;
}

/** The decisions `decide` can return: a pull is always `worth-it`, a recompute any other reason. */
const possibleDecisions = decisionReasons.map((reason: DecisionReason) => ({
  action: reason === 'worth-it' ? 'pull' : 'recompute',
  reason,
}));

let processDefaultMetrics: Registry | undefined;

/**
 * Puts prom-client's default metrics (`process_*`, `nodejs_*`) in `registry`, collected once per process
 * and shared by every registry given: each collection starts collectors that run for the life of the
 * process (an event-loop delay monitor, a GC observer). `RouterMetrics` and `EndpointMetrics` use it for
 * registries of their own. Throws `RouterOptionError` for a registry that is not one, or that holds any
 * of those metrics already.
 */
export function registerDefaultMetrics(registry: Registry): void {
  if (!(registry instanceof Registry))
    throw new RouterOptionError('registry', registry, 'a prom-client Registry (of the prom-client kvreuse depends on)');
  if (processDefaultMetrics === undefined) {
    processDefaultMetrics = new Registry();
    collectDefaultMetrics({ register: processDefaultMetrics });
  }
  const metrics = processDefaultMetrics.getMetricsAsArray().map(({ name }) => name);
  const held = metrics.find((name) => registry.getSingleMetric(name) !== undefined);
  if (held !== undefined)
    throw new RouterOptionError('registry', held, 'a registry without the default metrics: it holds this one already');
  for (const name of metrics) registry.registerMetric(processDefaultMetrics.getSingleMetric(name) as Metric);
}

/**
 * `kvreuse_route_decisions_total` (by action and reason) and `kvreuse_route_calibration_clock_refusals_total`
 * (by refusal), every possible series from the first scrape.
 */
export class RouterMetrics {
  readonly registry: Registry;
  readonly #decisions: Counter<'action' | 'reason'>;
  readonly #calibrationClockRefusals: Counter<'refusal'>;

  constructor(options: RouterMetricsOptions = {}) {
    if (typeof options !== 'object' || options === null)
      throw new RouterOptionError('metrics', options, 'an options object');
    if (options.registry !== undefined && !(options.registry instanceof Registry))
      throw new RouterOptionError(
        'metrics.registry',
        options.registry,
        'a prom-client Registry (of the prom-client kvreuse depends on)',
      );
    this.registry = options.registry ?? new Registry();
    if (options.registry === undefined) registerDefaultMetrics(this.registry);
    this.#decisions = new Counter({
      name: 'kvreuse_route_decisions_total',
      help: "The router's decisions, by action (pull, recompute) and reason (decisionReasons).",
      labelNames: ['action', 'reason'],
      registers: [this.registry],
    });
    for (const labels of possibleDecisions) this.#decisions.inc(labels, 0);
    this.#calibrationClockRefusals = new Counter({
      name: 'kvreuse_route_calibration_clock_refusals_total',
      help: "Decisions priced with the priors because the calibration's clock failed, by how it failed (calibrationClockRefusals).",
      labelNames: ['refusal'],
      registers: [this.registry],
    });
    for (const refusal of calibrationClockRefusals) this.#calibrationClockRefusals.inc({ refusal }, 0);
  }

  /** Counts one decision (as `decide` returned it), and its calibration fault if it has one. */
  decided(decision: Pick<RouteDecision, 'action' | 'reason' | 'calibrationFault'>): void {
    if (!possibleDecisions.some(({ action, reason }) => action === decision.action && reason === decision.reason))
      throw new RouterOptionError(
        'decision',
        decision,
        'a decision decide returns (pull worth-it, or recompute for another reason)',
      );
    const fault = decision.calibrationFault;
    if (fault !== undefined && !(isObject(fault) && calibrationClockRefusals.includes(fault.refusal)))
      throw new RouterOptionError(
        'decision.calibrationFault',
        fault,
        `absent, or a fault whose refusal is one of ${calibrationClockRefusals.join(', ')}`,
      );
    this.#decisions.inc({ action: decision.action, reason: decision.reason });
    if (fault !== undefined) this.#calibrationClockRefusals.inc({ refusal: fault.refusal });
  }

  /** The metrics in Prometheus' text format. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
