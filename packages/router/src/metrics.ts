// The router's Prometheus metrics: what it decided and why. The process that runs the router serves them
// (the demo's parent beside its ranks' endpoints, each of which serves its transfers and pins).
import { collectDefaultMetrics, Counter, type Metric, Registry } from 'prom-client';
import { type DecisionReason, decisionReasons, type RouteDecision } from './decide.js';
import { calibrationClockRefusals, isObject, RouterOptionError } from './errors.js';
import { lookupClockRefusals } from './lookup-budget.js';

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

/** Whether a decision's fault is one `decide` gives: an object whose `refusal` is one of `refusals`. */
const isFault = (fault: unknown, refusals: readonly string[]): boolean =>
  isObject(fault) && refusals.includes((fault as { readonly refusal?: unknown }).refusal as string);

/** A counter of decisions by how a clock failed, in `registry`, with every refusal's series from the first scrape. */
function refusalCounter(
  registry: Registry,
  name: string,
  help: string,
  refusals: readonly string[],
): Counter<'refusal'> {
  const counter = new Counter({ name, help, labelNames: ['refusal'], registers: [registry] });
  for (const refusal of refusals) counter.inc({ refusal }, 0);
  return counter;
}

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
 * `kvreuse_route_decisions_total` (by action and reason), `kvreuse_route_calibration_clock_refusals_total`
 * and `kvreuse_route_lookup_clock_refusals_total` (by refusal), every possible series from the first scrape.
 */
export class RouterMetrics {
  readonly registry: Registry;
  readonly #decisions: Counter<'action' | 'reason'>;
  readonly #calibrationClockRefusals: Counter<'refusal'>;
  readonly #lookupClockRefusals: Counter<'refusal'>;

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
    this.#calibrationClockRefusals = refusalCounter(
      this.registry,
      'kvreuse_route_calibration_clock_refusals_total',
      "Decisions priced with the priors because the calibration's clock failed, by how it failed (calibrationClockRefusals).",
      calibrationClockRefusals,
    );
    this.#lookupClockRefusals = refusalCounter(
      this.registry,
      'kvreuse_route_lookup_clock_refusals_total',
      'Decisions ended as budget-exceeded because the lookup clock failed, by how it failed (lookupClockRefusals).',
      lookupClockRefusals,
    );
  }

  /** Counts one decision (as `decide` returned it), and its calibration and lookup faults if it has them. */
  decided(decision: Pick<RouteDecision, 'action' | 'reason' | 'calibrationFault' | 'lookupFault'>): void {
    if (!possibleDecisions.some(({ action, reason }) => action === decision.action && reason === decision.reason))
      throw new RouterOptionError(
        'decision',
        decision,
        'a decision decide returns (pull worth-it, or recompute for another reason)',
      );
    const fault = decision.calibrationFault;
    if (fault !== undefined && !isFault(fault, calibrationClockRefusals))
      throw new RouterOptionError(
        'decision.calibrationFault',
        fault,
        `absent, or a fault whose refusal is one of ${calibrationClockRefusals.join(', ')}`,
      );
    const { lookupFault } = decision;
    if (
      lookupFault !== undefined &&
      !(isFault(lookupFault, lookupClockRefusals) && decision.reason === 'budget-exceeded')
    )
      throw new RouterOptionError(
        'decision.lookupFault',
        lookupFault,
        `absent, or on a budget-exceeded decision a fault whose refusal is one of ${lookupClockRefusals.join(', ')}`,
      );
    this.#decisions.inc({ action: decision.action, reason: decision.reason });
    if (fault !== undefined) this.#calibrationClockRefusals.inc({ refusal: fault.refusal });
    if (lookupFault !== undefined) this.#lookupClockRefusals.inc({ refusal: lookupFault.refusal });
  }

  /** The metrics in Prometheus' text format. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
