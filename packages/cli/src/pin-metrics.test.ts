import { EndpointMetrics, type MetricsListener } from '@kvreuse/endpoint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
      message: expect.stringMatching(new RegExp(`^metrics at ${url}: fetch failed: .*ECONNREFUSED`)),
    });
  });
});
