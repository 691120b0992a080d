import { EndpointMetrics, type MetricsListener, MetricsPortError } from '@kvreuse/endpoint';
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { pinsFromMetrics, readProcessPins } from './pin-metrics.js';

const metrics = new EndpointMetrics({ labels: { worker: 'decode-0' } });
let listener: MetricsListener;

beforeAll(async () => {
  metrics.pinsHeld('serve', 3);
  metrics.pinsHeld('pull', 1);
  listener = await metrics.listen(0);
});
afterAll(() => listener.close());

describe('pinsFromMetrics', () => {
  it("reads the endpoint's kvreuse_pins_held gauge by side, whatever other labels it carries", async () => {
    expect(pinsFromMetrics('u', await metrics.text())).toEqual({ url: 'u', serving: 3, holding: 1 });
  });

  it('undefined for metrics without the gauge', () => {
    expect(pinsFromMetrics('u', '# HELP up\nup 1\n')).toBeUndefined();
  });
});

describe('readProcessPins', () => {
  it("reads a live endpoint process's /metrics over HTTP", async () => {
    const url = `http://127.0.0.1:${listener.port}/metrics`;
    expect(await readProcessPins(url)).toEqual({ url, serving: 3, holding: 1 });
  });

  it('reads metrics served on a port that fetch refuses (6000, or another of the WHATWG bad ports that is free)', async () => {
    const badPorts = [6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080, 5060, 5061, 4190, 4045, 3659];
    let onBadPort: MetricsListener | undefined;
    for (const port of badPorts) {
      try {
        onBadPort = await metrics.listen(port);
        break;
      } catch (error) {
        if (!(error instanceof MetricsPortError && error.systemCode === 'EADDRINUSE')) throw error;
      }
    }
    expect(onBadPort).toBeDefined();
    try {
      expect(await readProcessPins(onBadPort!.url)).toEqual({ url: onBadPort!.url, serving: 3, holding: 1 });
    } finally {
      await onBadPort!.close();
    }
  });

  it('a page that is not the metrics: METRICS_UNAVAILABLE naming the URL and the status', async () => {
    const url = `http://127.0.0.1:${listener.port}/elsewhere`;
    await expect(readProcessPins(url)).rejects.toMatchObject({
      code: 'METRICS_UNAVAILABLE',
      message: `metrics at ${url}: HTTP 404`,
    });
  });

  it('nothing listening: METRICS_UNAVAILABLE naming the URL and the refusal', async () => {
    const closed = await new EndpointMetrics().listen(0);
    await closed.close();
    const url = `http://127.0.0.1:${closed.port}/metrics`;
    await expect(readProcessPins(url)).rejects.toMatchObject({
      code: 'METRICS_UNAVAILABLE',
      message: expect.stringMatching(new RegExp(`^metrics at ${url}: connect ECONNREFUSED`)),
    });
  });

  it('a process that never answers: METRICS_UNAVAILABLE once the 5 s deadline passes', async () => {
    const sockets: Socket[] = [];
    let connected = (): void => {};
    const accepted = new Promise<void>((resolve) => (connected = resolve));
    const silent = createServer((socket) => (sockets.push(socket), connected()));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(silent.address() as { port: number }).port}/metrics`;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const reading = readProcessPins(url);
      await accepted;
      vi.advanceTimersByTime(5000);
      await expect(reading).rejects.toMatchObject({
        code: 'METRICS_UNAVAILABLE',
        message: `metrics at ${url}: no answer within 5 s`,
      });
    } finally {
      vi.useRealTimers();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
