import { Counter, Gauge, type Registry } from 'prom-client';
import type { EngineEventSubscriber, EngineSubscriberMetrics } from './engine-subscriber.js';
import { EngineEventsInputError } from './errors.js';

/** One counter: its name, help, and the labelled values it reads from a subscriber's metrics. */
interface CounterSpec {
  readonly name: string;
  readonly help: string;
  readonly label?: string;
  readonly values: (metrics: EngineSubscriberMetrics) => Readonly<Record<string, number>>;
}

const total = (value: (metrics: EngineSubscriberMetrics) => number) => (metrics: EngineSubscriberMetrics) => ({
  '': value(metrics),
});

const counters: readonly CounterSpec[] = [
  { name: 'batches_total', help: 'event batches applied', values: total((m) => m.batches) },
  {
    name: 'ignored_batches_total',
    help: 'event batches the inventory ignored (it holds a newer epoch of the worker)',
    values: total((m) => m.ignoredBatches),
  },
  { name: 'events_total', help: 'events received, by type', label: 'type', values: (m) => m.events },
  {
    name: 'blocks_total',
    help: 'blocks indexed and dropped',
    label: 'change',
    values: (m) => ({ stored: m.blocksStored, removed: m.blocksRemoved }),
  },
  {
    name: 'skipped_blocks_total',
    help: 'blocks announced but not indexed, by reason',
    label: 'reason',
    values: (m) => m.skippedBlocks as Record<string, number>,
  },
  { name: 'malformed_total', help: 'frames skipped as malformed, by kind', label: 'kind', values: (m) => m.malformed },
  { name: 'gaps_total', help: 'gaps in the sequence numbers', values: total((m) => m.gaps) },
  { name: 'missed_batches_total', help: 'batches the live stream skipped', values: total((m) => m.missedBatches) },
  { name: 'replays_total', help: 'replays asked for', values: total((m) => m.replays) },
  {
    name: 'replayed_batches_total',
    help: 'missed batches a replay brought back',
    values: total((m) => m.replayedBatches),
  },
  {
    name: 'unrepaired_batches_total',
    help: 'missed batches never brought back',
    values: total((m) => m.unrepairedBatches),
  },
  {
    name: 'replay_failures_total',
    help: 'replays the publisher stopped answering',
    values: total((m) => m.replayFailures),
  },
  { name: 'restarts_total', help: 'publisher restarts (the sequence went back)', values: total((m) => m.restarts) },
  {
    name: 'ignored_restarts_total',
    help: 'publisher restarts the inventory ignored (it holds a newer epoch of the worker)',
    values: total((m) => m.ignoredRestarts),
  },
];

const counterName = (spec: CounterSpec): string => `kvreuse_engine_event_${spec.name}`;
const lagGaugeName = 'kvreuse_engine_event_lag_seconds';
const metricNames = [...counters.map(counterName), lagGaugeName];

/**
 * Registers the subscribers' metrics in a Prometheus registry, read from `subscribers()` at each
 * scrape, labelled by engine worker: `kvreuse_engine_event_<counter>` for each count of
 * `EngineSubscriberMetrics`, and `kvreuse_engine_event_lag_seconds`. A registry that holds any of
 * them already is refused, naming it, and none is registered.
 */
export function registerEngineEventMetrics(
  registry: Registry,
  subscribers: () => readonly EngineEventSubscriber[],
): void {
  const candidate = registry as Partial<Registry> | null;
  if (typeof candidate?.registerMetric !== 'function' || typeof candidate.getSingleMetric !== 'function')
    throw new EngineEventsInputError('registry', registry, 'a prom-client Registry');
  // Checked here, not at the first scrape, where the error would be the scrape's.
  if (typeof subscribers !== 'function')
    throw new EngineEventsInputError('subscribers', subscribers, 'a function returning the subscribers to report');
  const held = metricNames.find((name) => registry.getSingleMetric(name) !== undefined);
  if (held !== undefined)
    throw new EngineEventsInputError(
      'registry',
      held,
      'a registry without the engine event metrics: it holds this one already',
    );
  for (const spec of counters) {
    new Counter({
      name: counterName(spec),
      help: `Engine KV events: ${spec.help}.`,
      labelNames: spec.label === undefined ? ['worker'] : ['worker', spec.label],
      registers: [registry],
      collect() {
        this.reset();
        for (const subscriber of subscribers()) {
          for (const [key, value] of Object.entries(spec.values(subscriber.metrics()))) {
            const labels =
              spec.label === undefined
                ? { worker: subscriber.workerId }
                : { worker: subscriber.workerId, [spec.label]: key };
            this.inc(labels, value);
          }
        }
      },
    });
  }
  new Gauge({
    name: lagGaugeName,
    help: 'Engine KV events: how long after the engine stamped it the last batch was applied.',
    labelNames: ['worker'],
    registers: [registry],
    collect() {
      this.reset();
      for (const subscriber of subscribers()) {
        const { lagMs } = subscriber.metrics();
        if (lagMs !== null) this.set({ worker: subscriber.workerId }, lagMs / 1000);
      }
    },
  });
}
