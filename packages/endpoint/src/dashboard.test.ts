// The Grafana dashboard shipped in dashboards/: every query of every panel names only metrics an
// endpoint's or a router's /metrics exports, so no panel stays empty because a name drifted.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RouterMetrics } from '@kvreuse/router';
import { EndpointMetrics } from './metrics.js';

interface Dashboard {
  readonly panels: readonly { readonly title: string; readonly targets: readonly { readonly expr: string }[] }[];
}

const dashboard = JSON.parse(readFileSync(new URL('../dashboards/kvreuse.json', import.meta.url), 'utf8')) as Dashboard;

/** The series names an endpoint's and a router's registries export: each metric's, and a histogram's _bucket, _sum and _count. */
async function exportedNames(): Promise<Set<string>> {
  const metrics = [
    ...(await new EndpointMetrics().registry.getMetricsAsJSON()),
    ...(await new RouterMetrics().registry.getMetricsAsJSON()),
  ];
  return new Set(
    metrics.flatMap(({ name, type }) =>
      String(type) === 'histogram' ? [name, `${name}_bucket`, `${name}_sum`, `${name}_count`] : [name],
    ),
  );
}

/** The metric names a PromQL expression reads: kvreuse_*, process_* and nodejs_* identifiers. */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(?:kvreuse|process|nodejs)_[a-z0-9_]+\b/g)].map((match) => match[0]);
}

describe('dashboards/kvreuse.json', () => {
  it('every panel queries at least one metric, and every metric it names is one an endpoint or a router exports', async () => {
    const exported = await exportedNames();
    const unknown = dashboard.panels.flatMap((panel) => {
      const names = panel.targets.flatMap((target) => metricNames(target.expr));
      if (names.length === 0) return [`${panel.title}: no kvreuse, process or nodejs metric`];
      return names.filter((name) => !exported.has(name)).map((name) => `${panel.title}: ${name}`);
    });
    expect(unknown).toEqual([]);
    expect(dashboard.panels.length).toBeGreaterThan(0);
  });

  it('finds a name no endpoint exports', () => {
    expect(metricNames('sum(rate(kvreuse_transfer_bytez_total[5m])) / process_cpu_seconds_total')).toEqual([
      'kvreuse_transfer_bytez_total',
      'process_cpu_seconds_total',
    ]);
  });
});
