import perfHooks from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { codeOf } from '@kvreuse/errors';
import { registerDefaultMetrics, RouterMetrics } from './metrics.js';

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('RouterMetrics', () => {
  it('counts each decision by action and reason, every possible series scraped from the first, with the process metrics', async () => {
    const metrics = new RouterMetrics();
    metrics.decided({ action: 'pull', reason: 'worth-it' });
    metrics.decided({ action: 'recompute', reason: 'too-short' });
    metrics.decided({ action: 'recompute', reason: 'too-short' });
    const text = await metrics.text();
    expect(text).toContain('kvreuse_route_decisions_total{action="pull",reason="worth-it"} 1\n');
    expect(text).toContain('kvreuse_route_decisions_total{action="recompute",reason="too-short"} 2\n');
    expect(text).toContain('kvreuse_route_decisions_total{action="recompute",reason="budget-exceeded"} 0\n');
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
  });

  it("collects the process's default metrics once: a later RouterMetrics starts no collector and serves them too", async () => {
    new RouterMetrics();
    const monitors = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    const observers = vi.spyOn(perfHooks.PerformanceObserver.prototype, 'observe');
    const later = [new RouterMetrics(), new RouterMetrics()];
    expect(monitors).not.toHaveBeenCalled();
    expect(observers).not.toHaveBeenCalled();
    for (const metrics of later) expect(await metrics.text()).toMatch(/^nodejs_eventloop_lag_seconds /m);
  });

  it("registerDefaultMetrics puts the process's default metrics in a caller's registry once, starting no collector again", async () => {
    new RouterMetrics();
    const monitors = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    const registry = new Registry();
    registerDefaultMetrics(registry);
    expect(monitors).not.toHaveBeenCalled();
    expect(await registry.metrics()).toMatch(/^process_cpu_user_seconds_total /m);
    expect(codeOf(thrown(() => registerDefaultMetrics(registry)))).toBe('INVALID_ROUTER_OPTION');
    expect(() => registerDefaultMetrics(registry)).toThrow('process_cpu_user_seconds_total');
    expect(() => registerDefaultMetrics({} as Registry)).toThrow('registry');
  });

  it('in a registry given, adds only its own metrics', async () => {
    const registry = new Registry();
    new RouterMetrics({ registry }).decided({ action: 'recompute', reason: 'disabled' });
    const names = (await registry.getMetricsAsJSON()).map(({ name }) => name);
    expect(names).toEqual(['kvreuse_route_decisions_total']);
  });

  it('refuses a decision decide never returns, and a registry that is not one', () => {
    const metrics = new RouterMetrics();
    expect(codeOf(thrown(() => metrics.decided({ action: 'pull', reason: 'too-short' })))).toBe(
      'INVALID_ROUTER_OPTION',
    );
    expect(codeOf(thrown(() => new RouterMetrics({ registry: {} as Registry })))).toBe('INVALID_ROUTER_OPTION');
  });
});
