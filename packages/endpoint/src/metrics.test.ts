import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import perfHooks from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { describe, expect, it, vi } from 'vitest';
import { EndpointOptionError, MetricsPortError } from './errors.js';
import { EndpointMetrics, listenMetrics } from './metrics.js';
import { pinMessageRefusals } from './pin-auth.js';

/** The value of the series `name{labels}` in Prometheus' text format, whatever order its labels are written in. */
function sample(text: string, series: string): number | undefined {
  const parse = (written: string): { name: string; labels: string } => {
    const open = written.indexOf('{');
    if (open < 0) return { name: written, labels: '' };
    const labels = written.slice(open + 1, written.lastIndexOf('}')).match(/[a-z_]+="[^"]*"/g) ?? [];
    return { name: written.slice(0, open), labels: [...labels].sort().join(',') };
  };
  const wanted = parse(series);
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const space = line.lastIndexOf(' ');
    const found = parse(line.slice(0, space));
    if (found.name === wanted.name && found.labels === wanted.labels) return Number(line.slice(space + 1));
  }
  return undefined;
}

describe('EndpointMetrics', () => {
  it("kvreuse_pin_messages_refused_total's help names every reason it counts", async () => {
    const help = (await new EndpointMetrics().text())
      .split('\n')
      .find((line) => line.startsWith('# HELP kvreuse_pin_messages_refused_total '));
    const named = pinMessageRefusals.filter((reason) => new RegExp(`\\b${reason}\\b`).test(help ?? ''));
    expect(named).toEqual([...pinMessageRefusals]);
  });

  it('counts transfers, bytes, blocks and durations by side, tier and link class', async () => {
    const metrics = new EndpointMetrics({ labels: { worker: 'prefill-0' } });
    metrics.transferCompleted({
      side: 'pull',
      blocks: 42,
      bytes: 308_281_344,
      durationMs: 35,
      tier: 'host',
      linkClass: 'same-host',
    });
    metrics.transferCompleted({
      side: 'pull',
      blocks: 2,
      bytes: 14_680_064,
      durationMs: 2,
      tier: 'host',
      linkClass: 'same-host',
    });
    const text = await metrics.text();
    const labels = 'side="pull",tier="host",link_class="same-host",worker="prefill-0"';
    expect(sample(text, `kvreuse_transfers_total{${labels}}`)).toBe(2);
    expect(sample(text, `kvreuse_transfer_bytes_total{${labels}}`)).toBe(322_961_408);
    expect(sample(text, `kvreuse_transfer_blocks_total{${labels}}`)).toBe(44);
    expect(sample(text, `kvreuse_transfer_duration_seconds_count{${labels}}`)).toBe(2);
    expect(sample(text, `kvreuse_transfer_duration_seconds_bucket{le="0.0025",${labels}}`)).toBe(1);
    expect(sample(text, `kvreuse_transfer_duration_seconds_bucket{le="0.05",${labels}}`)).toBe(2);
  });

  it('reports failures by code, pins, banks and the lifecycle state; no router decisions (the router serves those)', async () => {
    const metrics = new EndpointMetrics();
    metrics.transferFailed('pull', 'REMOTE_DISCONNECT');
    metrics.transferFailed('pull', 'REMOTE_DISCONNECT');
    metrics.pinsHeld('serve', 3);
    metrics.banks({ registered: 56, retained: 2, quarantined: 1 });
    metrics.state('ready');
    metrics.pinMessageRefused('unauthenticated');
    metrics.pinMessageRefused('unauthenticated');
    const text = await metrics.text();
    expect(sample(text, 'kvreuse_transfer_failures_total{side="pull",code="REMOTE_DISCONNECT"}')).toBe(2);
    expect(sample(text, 'kvreuse_pins_held{side="serve"}')).toBe(3);
    expect(sample(text, 'kvreuse_pins_held{side="pull"}')).toBe(0);
    expect(sample(text, 'kvreuse_pin_messages_refused_total{reason="unauthenticated"}')).toBe(2);
    expect(sample(text, 'kvreuse_pin_messages_refused_total{reason="replayed"}')).toBe(0);
    expect(sample(text, 'kvreuse_banks{state="quarantined"}')).toBe(1);
    expect(sample(text, 'kvreuse_endpoint_state{state="ready"}')).toBe(1);
    expect(sample(text, 'kvreuse_endpoint_state{state="created"}')).toBe(0);
    expect(text).not.toContain('kvreuse_route_decisions_total');
  });

  it('refuses values that would corrupt a series, naming them, and records nothing', async () => {
    const metrics = new EndpointMetrics();
    expect(() =>
      metrics.transferCompleted({
        side: 'pull',
        blocks: 1,
        bytes: Number.NaN,
        durationMs: 1,
        tier: 'host',
        linkClass: 'network',
      }),
    ).toThrow(new EndpointOptionError('transfer.bytes', Number.NaN, 'a finite number ≥ 0'));
    expect(() => metrics.pinsHeld('pull', -1)).toThrow(
      'endpoint option pinsHeld.pull = -1 is refused: a whole number ≥ 0',
    );
    expect(() => metrics.state('sleeping' as never)).toThrow(EndpointOptionError);
    expect(() => metrics.pinMessageRefused('rude' as never)).toThrow(
      'one of unauthenticated, malformed, not-reader, not-source, replayed',
    );
    expect(() => new EndpointMetrics({ labels: { 'bad-name': 'x' } })).toThrow('metrics.labels.bad-name');
    expect(() => new EndpointMetrics({ registry: {} as Registry })).toThrow('metrics.registry');
    expect(await metrics.text()).not.toContain('kvreuse_transfers_total{');
  });

  it("with a registry of its own: the process's default metrics and kvreuse_build_info; a caller's registry gets no defaults", async () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    const own = await new EndpointMetrics().registry.metrics();
    for (const name of [
      'process_cpu_user_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
    ])
      expect(own).toMatch(new RegExp(`^${name}(\\{[^}]*\\})? `, 'm'));
    expect(sample(own, `kvreuse_build_info{nodejs="${process.version}",version="${version}"}`)).toBe(1);
    const given = await new EndpointMetrics({ registry: new Registry() }).registry.metrics();
    expect(given).not.toContain('process_cpu_user_seconds_total');
    expect(sample(given, `kvreuse_build_info{nodejs="${process.version}",version="${version}"}`)).toBe(1);
  });

  it("collects the process's default metrics once: a later EndpointMetrics starts no collector and serves them under its own labels", async () => {
    new EndpointMetrics();
    const monitors = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    const observers = vi.spyOn(perfHooks.PerformanceObserver.prototype, 'observe');
    try {
      const later = new Map(['a', 'b'].map((worker) => [worker, new EndpointMetrics({ labels: { worker } })]));
      expect(monitors).not.toHaveBeenCalled();
      expect(observers).not.toHaveBeenCalled();
      for (const [worker, metrics] of later)
        expect(await metrics.registry.metrics()).toMatch(
          new RegExp(`^nodejs_eventloop_lag_seconds\\{worker="${worker}"\\} `, 'm'),
        );
    } finally {
      monitors.mockRestore();
      observers.mockRestore();
    }
  });

  it('registers into a registry the caller owns', async () => {
    const registry = new Registry();
    new EndpointMetrics({ registry }).pinsHeld('pull', 2);
    expect(await registry.metrics()).toContain('kvreuse_pins_held{side="pull"} 2');
  });

  it('serves GET /metrics on 127.0.0.1, 404 elsewhere, and closes', async () => {
    const metrics = new EndpointMetrics();
    metrics.pinsHeld('serve', 1);
    const listener = await metrics.listen(0);
    try {
      expect(listener.host).toBe('127.0.0.1');
      expect(listener.url).toBe(`http://127.0.0.1:${listener.port}/metrics`);
      const ok = await fetch(listener.url);
      expect(ok.status).toBe(200);
      expect(ok.headers.get('content-type')).toContain('text/plain');
      expect(await ok.text()).toContain('kvreuse_pins_held{side="serve"} 1');
      const missing = await fetch(`http://127.0.0.1:${listener.port}/other`);
      expect(missing.status).toBe(404);
      await missing.text();
    } finally {
      await listener.close();
    }
    await expect(fetch(`http://127.0.0.1:${listener.port}/metrics`)).rejects.toThrow();
  });

  it('a port in use rejects with MetricsPortError naming the host and port; a bad port or host rejects with EndpointOptionError before listening', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const refused = new EndpointMetrics().listen(port);
      await expect(refused).rejects.toBeInstanceOf(MetricsPortError);
      await expect(refused).rejects.toMatchObject({
        code: 'METRICS_PORT_UNAVAILABLE',
        host: '127.0.0.1',
        port,
        systemCode: 'EADDRINUSE',
      });
      await expect(refused).rejects.toThrow(
        `cannot serve metrics on 127.0.0.1:${port}: the port is in use (EADDRINUSE`,
      );
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
    await expect(new EndpointMetrics().listen(70_000)).rejects.toThrow(
      new EndpointOptionError('metrics.port', 70_000, 'a whole number from 0 to 65535'),
    );
    // An empty host would listen on every interface.
    for (const host of ['', 'no host', 5])
      await expect(new EndpointMetrics().listen(0, host as string)).rejects.toThrow(
        new EndpointOptionError('metrics.host', host, 'an IPv4 or IPv6 address or a host name'),
      );
    await expect(listenMetrics(new Registry(), -1)).rejects.toThrow(
      new EndpointOptionError('metrics.port', -1, 'a whole number from 0 to 65535'),
    );
  });
});
