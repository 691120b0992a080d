// A single-member etcd of a run's own (Debian's etcd-server): on free loopback ports, its data in a fresh
// temporary directory, stopped and its data removed at the end of the run, or when the run is interrupted.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { SettingsEnv } from '@kvreuse/config';
import { EtcdUnavailableError } from './errors.js';
import type { WhenInterrupted } from './interrupts.js';

/** A loopback port nothing listens on (the kernel handed it out and it was closed again). */
async function freeLoopbackPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Two distinct free loopback ports: etcd's client port and its peer port. */
async function freeLoopbackPorts(): Promise<readonly [number, number]> {
  const clientPort = await freeLoopbackPort();
  let peerPort = await freeLoopbackPort();
  while (peerPort === clientPort) peerPort = await freeLoopbackPort();
  return [clientPort, peerPort];
}

export interface LocalEtcd {
  /** Where clients connect: `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly pid: number;
  readonly dataDir: string;
  /** Ends the process and removes its data directory; resolves once both are gone. */
  stop(): Promise<void>;
}

export interface LocalEtcdOptions {
  /** The command that starts it, for its errors. */
  readonly command: string;
  /** The environment it runs with; its `PATH` is where `etcd` is looked for. */
  readonly env: SettingsEnv;
  /** Where its stop is registered for an interruption of the run (none: an interruption leaves it running). */
  readonly whenInterrupted?: WhenInterrupted;
  /** Picks the client and peer ports of each try (by default two the kernel hands out). */
  readonly ports?: () => Promise<readonly [number, number]>;
}

/** Tries of fresh ports when another socket took one of them before etcd bound it. */
const portTries = 3;

const stderrTail = 2_000;
/** A single member answers within a second or two; a minute only ends a start that went wrong. */
const startTimeoutMs = 60_000;
const probeTimeoutMs = 2_000;

async function healthy(url: string): Promise<boolean> {
  return fetch(`${url}/health`, { signal: AbortSignal.timeout(probeTimeoutMs) }).then(
    async (response) => response.ok && ((await response.json()) as { health?: string }).health === 'true',
    () => false,
  );
}

/** Whether the etcd serving `url` is the one started with `peer`, not another that took the port first. */
async function servedBy(url: string, peer: string): Promise<boolean> {
  return fetch(`${url}/v3/cluster/member/list`, {
    method: 'POST',
    body: '{}',
    signal: AbortSignal.timeout(probeTimeoutMs),
  }).then(
    async (response) =>
      response.ok &&
      ((await response.json()) as { members?: { peerURLs?: string[] }[] }).members?.some((member) =>
        member.peerURLs?.includes(peer),
      ) === true,
    () => false,
  );
}

/**
 * Starts etcd and resolves once it answers healthy; throws `EtcdUnavailableError` when it is not installed or does not
 * start. A port is free when it is picked, but another socket may take it before etcd binds it: etcd then exits
 * saying the address is in use, and it is started again on other ports, up to three tries in all.
 */
export async function startLocalEtcd(options: LocalEtcdOptions): Promise<LocalEtcd> {
  for (let attempt = 1; ; attempt++) {
    const [clientPort, peerPort] = await (options.ports ?? freeLoopbackPorts)();
    const started = await startOn(options, clientPort, peerPort, attempt === portTries);
    if (started !== undefined) return started;
  }
}

/** One try on these ports; undefined when one of them was taken and this is not the last try. */
async function startOn(
  options: LocalEtcdOptions,
  clientPort: number,
  peerPort: number,
  lastTry: boolean,
): Promise<LocalEtcd | undefined> {
  const url = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'kvreuse-local-etcd-'));
  const child = spawn(
    'etcd',
    [
      '--name=kvreuse',
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=kvreuse=${peer}`,
      '--logger=zap',
      '--log-level=error',
    ],
    { env: options.env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-stderrTail)));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  // Its data is thrown away with it: SIGKILL, so that a stop never waits on etcd's own shutdown.
  const end = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  };
  const takeBack = options.whenInterrupted?.(end) ?? (() => undefined);
  const stop = async (): Promise<void> => {
    takeBack();
    await end();
  };

  const spawned = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    child.once('spawn', () => resolve(undefined));
    child.once('error', resolve);
  });
  if (spawned !== undefined) {
    takeBack();
    rmSync(dataDir, { recursive: true, force: true });
    const missing =
      spawned.code === 'ENOENT' ? 'no etcd executable on PATH' : `etcd could not be run: ${spawned.message}`;
    throw new EtcdUnavailableError(options.command, missing, { cause: spawned });
  }
  const deadline = performance.now() + startTimeoutMs;
  for (;;) {
    if ((await healthy(url)) && (await servedBy(url, peer))) return { url, pid: child.pid as number, dataDir, stop };
    const ended = child.exitCode !== null || child.signalCode !== null;
    if (ended || performance.now() > deadline) {
      await stop();
      if (ended && !lastTry && stderr.includes('address already in use')) return undefined;
      const why = ended
        ? `etcd exited with ${child.signalCode ?? `code ${child.exitCode}`}`
        : `etcd did not answer within ${startTimeoutMs} ms`;
      const said = stderr.trim().split('\n').at(-1) ?? '';
      throw new EtcdUnavailableError(
        options.command,
        `${why} before it served ${url}${said === '' ? '' : `: ${said}`}`,
      );
    }
    await delay(50);
  }
}
