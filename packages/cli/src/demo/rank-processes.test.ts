import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultSettings, type Settings } from '../settings/all-settings.js';
import { loadTransport } from '@kvreuse/native-bindings';
import { afterAll, describe, expect, it } from 'vitest';
import { portIsFree, reservePorts } from '@kvreuse-internal/test-support';
import { DemoProcessError } from '../errors.js';
import { readProcessPins } from '../pin-metrics.js';
import type { RankMessage } from './rank-messages.js';
import { RankProcesses, type RankSpec } from './rank-processes.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-demo-processes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const sqliteSettings = (name: string): Settings => ({
  ...defaultSettings,
  discovery: { ...defaultSettings.discovery, backend: 'sqlite', sqlitePath: join(dir, `${name}.sqlite`) },
});

const ranks: readonly RankSpec[] = [
  { role: 'decode', workerId: 'decode-0', tpRank: 0, tpSize: 2, peerWorkerId: 'prefill-0' },
  { role: 'decode', workerId: 'decode-0', tpRank: 1, tpSize: 2, peerWorkerId: 'prefill-0' },
  { role: 'prefill', workerId: 'prefill-0', tpRank: 0, tpSize: 1, peerWorkerId: 'decode-0' },
];

describe('the demo ranks as OS processes over UCX with SQLite discovery', () => {
  it('a decode worker of TP 2 and a prefill worker of TP 1 become ready on the native library named, with the environment added; SIGTERM drains each and every bank goes back', async () => {
    const seen: string[] = [];
    // A copy of the library at a path of its own: each rank maps the one it was given, not the default one.
    const libraryPath = join(dir, 'libkvreuse_transport.so');
    copyFileSync(loadTransport().libraryPath, libraryPath);
    const processes = await RankProcesses.start({
      ranks,
      backend: 'ucx',
      settings: sqliteSettings('ready'),
      libraryPath,
      blocks: 4,
      readyTimeoutMs: 60_000,
      env: { KVREUSE_DEMO_TEST_MARK: 'added' },
      onMessage: (rank, message: RankMessage) => seen.push(`${rank.workerId}/tp${rank.tpRank} ${message.type}`),
    });
    expect(new Set(processes.ranks.map((rank) => rank.pid)).size).toBe(3);
    for (const rank of processes.ranks) expect(rank.messages.map((message) => message.type)).toContain('ready');
    for (const rank of processes.ranks) expect(readFileSync(`/proc/${rank.pid}/maps`, 'utf8')).toContain(libraryPath);
    for (const rank of processes.ranks)
      expect(readFileSync(`/proc/${rank.pid}/environ`, 'utf8').split('\0')).toContain('KVREUSE_DEMO_TEST_MARK=added');
    expect(process.env['KVREUSE_DEMO_TEST_MARK']).toBeUndefined();

    const drains = await processes.stop();
    expect(drains).toEqual(
      ranks.map((spec) => ({
        process: `${spec.workerId}/tp${spec.tpRank}`,
        pid: expect.any(Number),
        exitCode: 0,
        signal: null,
        // Qwen3-0.6B: 28 layers × 2 planes, one bank each, whatever the rank.
        drain: {
          banksReturned: 56,
          banksRetained: 0,
          quarantined: 0,
          agentDestroyed: true,
          pins: { waitedFor: 0, released: 0, lapsed: 0, outstanding: 0, held: [] },
          steps: expect.arrayContaining(['withdraw-rank-parts: ok', 'deregister: ok', 'hand-back: ok']),
        },
      })),
    );
    expect(seen.filter((line) => line.endsWith(' drained'))).toHaveLength(3);
  }, 120_000);

  it('a rank killed with SIGKILL ends without a report; the others still drain and hand everything back', async () => {
    const processes = await RankProcesses.start({
      ranks,
      backend: 'ucx',
      settings: sqliteSettings('killed'),
      blocks: 2,
      readyTimeoutMs: 60_000,
    });
    processes.kill('decode-0', 1);
    const drains = await processes.stop();
    expect(drains.find((drain) => drain.process === 'decode-0/tp1')).toEqual({
      process: 'decode-0/tp1',
      pid: expect.any(Number),
      exitCode: null,
      signal: 'SIGKILL',
    });
    for (const drain of drains.filter((d) => d.process !== 'decode-0/tp1'))
      expect(drain).toMatchObject({ exitCode: 0, drain: { banksReturned: 56, banksRetained: 0 } });
  }, 120_000);

  it('a rank that cannot start fails the start with its own error line, and the others are stopped', async () => {
    // TP rank 3 of a TP 1 worker has no shard: that process fails while laying out its banks.
    const impossible: readonly RankSpec[] = [
      ranks[0] as RankSpec,
      { role: 'prefill', workerId: 'prefill-0', tpRank: 3, tpSize: 1, peerWorkerId: 'decode-0' },
    ];
    const start = RankProcesses.start({
      ranks: impossible,
      backend: 'ucx',
      settings: sqliteSettings('failing'),
      blocks: 2,
      readyTimeoutMs: 60_000,
    });
    await expect(start).rejects.toBeInstanceOf(DemoProcessError);
    await expect(start).rejects.toThrow(
      /^demo process prefill-0\/tp3 failed before reporting "published": InvalidShardError: .*tpRank = 3/,
    );
  }, 120_000);
});

const metricsOf = (processes: RankProcesses): (string | undefined)[] =>
  processes.ranks.map(
    (rank) => rank.messages.flatMap((message) => (message.type === 'published' ? [message.metricsUrl] : []))[0],
  );

describe('the demo ranks serving their metrics (endpoint.metrics_port)', () => {
  // A decode worker and a prefill worker of TP 1 each: each becomes ready on its own.
  const pair: readonly RankSpec[] = [
    { role: 'decode', workerId: 'decode-m', tpRank: 0, tpSize: 1, peerWorkerId: 'prefill-m' },
    { role: 'prefill', workerId: 'prefill-m', tpRank: 0, tpSize: 1, peerWorkerId: 'decode-m' },
  ];
  const withMetricsPort = (name: string, metricsPort: number): Settings => {
    const settings = sqliteSettings(name);
    return { ...settings, endpoint: { ...settings.endpoint, metricsPort } };
  };

  it("over UCX: each rank process serves GET /metrics on its own port, the setting's first and the next, as inspect --metrics reads it", async () => {
    const first = await reservePorts(pair.length);
    const processes = await RankProcesses.start({
      ranks: pair,
      backend: 'ucx',
      settings: withMetricsPort('metrics-ucx', first),
      blocks: 2,
      readyTimeoutMs: 60_000,
    });
    try {
      const urls = metricsOf(processes);
      expect(urls).toEqual([`http://127.0.0.1:${first}/metrics`, `http://127.0.0.1:${first + 1}/metrics`]);
      for (const [index, url] of urls.entries()) {
        const response = await fetch(url as string);
        expect(response.status).toBe(200);
        const text = await response.text();
        // The endpoint's own gauge, labelled with the rank's worker: this process's endpoint, ready.
        expect(text).toMatch(
          new RegExp(
            `^kvreuse_endpoint_state\\{(?=[^}]*state="ready")(?=[^}]*worker="${pair[index]!.workerId}")[^}]*\\} 1$`,
            'm',
          ),
        );
        expect(await readProcessPins(url as string)).toEqual({ url, serving: 0, holding: 0 });
      }
    } finally {
      const drains = await processes.stop();
      expect(drains.map((drain) => drain.exitCode)).toEqual([0, 0]);
    }
  }, 60_000);

  it('over UCX: a rank whose metrics port is in use fails the start with the error naming the port, and the others are stopped', async () => {
    const first = await reservePorts(pair.length);
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(first + 1, '127.0.0.1', resolve));
    try {
      const start = RankProcesses.start({
        ranks: pair,
        backend: 'ucx',
        settings: withMetricsPort('metrics-taken', first),
        blocks: 2,
        readyTimeoutMs: 60_000,
      });
      await expect(start).rejects.toBeInstanceOf(DemoProcessError);
      await expect(start).rejects.toThrow(
        `demo process prefill-m/tp0 failed before reporting "published": MetricsPortError: cannot serve metrics on 127.0.0.1:${first + 1}: the port is in use (EADDRINUSE`,
      );
      expect(await portIsFree(first)).toBe(true);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 60_000);

  it('on loopback, in this process: each rank closes its listener at its shutdown; without the setting no rank serves metrics', async () => {
    const first = await reservePorts(pair.length);
    const processes = await RankProcesses.start({
      ranks: pair,
      backend: 'loopback',
      settings: withMetricsPort('metrics-loopback', first),
      blocks: 2,
      readyTimeoutMs: 60_000,
    });
    const urls = metricsOf(processes);
    expect(urls).toEqual([`http://127.0.0.1:${first}/metrics`, `http://127.0.0.1:${first + 1}/metrics`]);
    for (const url of urls) expect((await fetch(url as string)).status).toBe(200);
    const drains = await processes.stop();
    expect(drains.map((drain) => drain.exitCode)).toEqual([0, 0]);
    for (const url of urls) await expect(fetch(url as string)).rejects.toThrow();
    expect(await Promise.all([first, first + 1].map(portIsFree))).toEqual([true, true]);

    const without = await RankProcesses.start({
      ranks: pair,
      backend: 'loopback',
      settings: sqliteSettings('no-metrics'),
      blocks: 2,
      readyTimeoutMs: 60_000,
    });
    expect(metricsOf(without)).toEqual([undefined, undefined]);
    await without.stop();
  }, 60_000);

  it('on loopback, in this process: a pull asking the rank to stop its own process is refused, naming the option', async () => {
    const processes = await RankProcesses.start({
      ranks: pair,
      backend: 'loopback',
      settings: sqliteSettings('stop-after-post'),
      blocks: 2,
      readyTimeoutMs: 60_000,
    });
    try {
      const hint = {
        workerId: 'decode-m',
        incarnation: 'any',
        epoch: 1,
        start: 0,
        hashes: ['00000000000000aa'],
        blockTokens: 16,
        linkClass: 'same-host',
        tier: 'host',
      } as const;
      await expect(
        processes.request('prefill-m', 0, { type: 'pull', hint, stopAfterPost: true }, 'pulled', 30_000),
      ).rejects.toThrow(
        'failed before reporting "pulled": DemoMessageError: demo message: command "pull" stopAfterPost needs a rank in a process of its own, which it stops',
      );
    } finally {
      await processes.stop();
    }
  }, 60_000);
});
