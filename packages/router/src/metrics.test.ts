import perfHooks from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { codeOf } from '@kvreuse/errors';
import { RouterOptionError } from './errors.js';
import { registerDefaultMetrics, RouterMetrics } from './metrics.js';

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

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
    try {
      const later = [new RouterMetrics(), new RouterMetrics()];
      expect(monitors).not.toHaveBeenCalled();
      expect(observers).not.toHaveBeenCalled();
      for (const metrics of later) expect(await metrics.text()).toMatch(/^nodejs_eventloop_lag_seconds /m);
    } finally {
      monitors.mockRestore();
      observers.mockRestore();
    }
  });

  it("registerDefaultMetrics puts the process's default metrics in a caller's registry once, starting no collector again", async () => {
    new RouterMetrics();
    const monitors = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    const registry = new Registry();
    try {
      registerDefaultMetrics(registry);
      expect(monitors).not.toHaveBeenCalled();
    } finally {
      monitors.mockRestore();
    }
    expect(await registry.metrics()).toMatch(/^process_cpu_user_seconds_total /m);
    expect(codeOf(thrown(() => registerDefaultMetrics(registry)))).toBe('INVALID_ROUTER_OPTION');
    expect(() => registerDefaultMetrics(registry)).toThrow('process_cpu_user_seconds_total');
    expect(() => registerDefaultMetrics({} as Registry)).toThrow('registry');
  });

  it('in a registry given, adds only its own metrics', async () => {
    const registry = new Registry();
    new RouterMetrics({ registry }).decided({ action: 'recompute', reason: 'disabled' });
    const names = (await registry.getMetricsAsJSON()).map(({ name }) => name);
    expect(names).toEqual([
      'kvreuse_route_decisions_total',
      'kvreuse_route_calibration_clock_refusals_total',
      'kvreuse_route_lookup_clock_refusals_total',
    ]);
  });

  it("counts the decisions priced with the priors because the calibration's clock failed, by how it failed", async () => {
    const metrics = new RouterMetrics();
    const fault = {
      refusal: 'went-back',
      detail: 'calibration clock options.now is refused: it read 1 after 2',
    } as const;
    metrics.decided({ action: 'pull', reason: 'worth-it', calibrationFault: fault });
    metrics.decided({ action: 'recompute', reason: 'not-worth-it', calibrationFault: fault });
    metrics.decided({ action: 'pull', reason: 'worth-it' });
    const text = await metrics.text();
    expect(text).toContain('kvreuse_route_calibration_clock_refusals_total{refusal="went-back"} 2\n');
    expect(text).toContain('kvreuse_route_calibration_clock_refusals_total{refusal="threw"} 0\n');
    expect(text).toContain('kvreuse_route_decisions_total{action="pull",reason="worth-it"} 2\n');
  });

  it('counts the decisions ended as budget-exceeded because the lookup clock failed, by how it failed', async () => {
    const metrics = new RouterMetrics();
    const fault = {
      refusal: 'not-finite',
      detail: 'the lookup clock (context.clock) failed, it read NaN, not a finite number of milliseconds',
    } as const;
    metrics.decided({ action: 'recompute', reason: 'budget-exceeded', lookupFault: fault });
    metrics.decided({ action: 'recompute', reason: 'budget-exceeded' });
    const text = await metrics.text();
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="not-finite"} 1\n');
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="threw"} 0\n');
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="went-back"} 0\n');
    expect(text).toContain('kvreuse_route_decisions_total{action="recompute",reason="budget-exceeded"} 2\n');
  });

  it('refuses, counting nothing, a lookup fault decide never gives: an unknown refusal, or one on a decision within budget', async () => {
    const metrics = new RouterMetrics();
    const unknownFault = { refusal: 'late', detail: '' } as never;
    expect(() =>
      metrics.decided({ action: 'recompute', reason: 'budget-exceeded', lookupFault: unknownFault }),
    ).toThrow(
      /decision.lookupFault .* is refused: absent, or on a budget-exceeded decision a fault whose refusal is one of threw, re-entered, not-finite, went-back/,
    );
    const fault = { refusal: 'threw', detail: 'the lookup clock (context.clock) failed, it threw: gone' } as const;
    expect(codeOf(thrown(() => metrics.decided({ action: 'pull', reason: 'worth-it', lookupFault: fault })))).toBe(
      'INVALID_ROUTER_OPTION',
    );
    const text = await metrics.text();
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="threw"} 0\n');
    expect(text).toContain('kvreuse_route_decisions_total{action="pull",reason="worth-it"} 0\n');
    expect(text).toContain('kvreuse_route_decisions_total{action="recompute",reason="budget-exceeded"} 0\n');
  });

  it('refuses a decision decide never returns, and a registry that is not one', () => {
    const metrics = new RouterMetrics();
    expect(codeOf(thrown(() => metrics.decided({ action: 'pull', reason: 'too-short' })))).toBe(
      'INVALID_ROUTER_OPTION',
    );
    expect(codeOf(thrown(() => new RouterMetrics({ registry: {} as Registry })))).toBe('INVALID_ROUTER_OPTION');
    const unknownFault = { refusal: 'late', detail: '' } as never;
    expect(() => metrics.decided({ action: 'pull', reason: 'worth-it', calibrationFault: unknownFault })).toThrow(
      /decision.calibrationFault .* is refused: absent, or a fault whose refusal is one of threw, re-entered/,
    );
  });

  it('counts nothing of a decision it refuses', async () => {
    const metrics = new RouterMetrics();
    const unknownFault = { refusal: 'late', detail: '' } as never;
    expect(() => metrics.decided({ action: 'pull', reason: 'worth-it', calibrationFault: unknownFault })).toThrow(
      RouterOptionError,
    );
    expect(await metrics.text()).toContain('kvreuse_route_decisions_total{action="pull",reason="worth-it"} 0\n');
  });
});
