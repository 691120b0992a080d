// A real etcd for the inspect tests: Debian's etcd-server on free loopback ports, its data in a temp dir.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

/** A loopback port nothing listens on (the kernel handed it out and it was closed again). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface RunningEtcd {
  readonly url: string;
  /** SIGSTOP: its connections stay open and nothing answers. */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

export async function startEtcd(): Promise<RunningEtcd> {
  const [clientPort, peerPort] = [await closedPort(), await closedPort()];
  const dataDir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-etcd-'));
  const url = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const child: ChildProcess = spawn(
    'etcd',
    [`--name=cli`, `--data-dir=${dataDir}`, `--listen-client-urls=${url}`, `--advertise-client-urls=${url}`, `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`, `--initial-cluster=cli=${peer}`, '--log-level=error'],
    { stdio: 'ignore' },
  );
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  // Health is polled until etcd answers: how long it takes to start says nothing about the test.
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`etcd exited with ${child.exitCode} before it served ${url}`);
    }
    const healthy = await fetch(`${url}/health`).then(
      async (response) => response.ok && ((await response.json()) as { health?: string }).health === 'true',
      () => false,
    );
    if (healthy) return { url, stop, pause: () => child.kill('SIGSTOP'), resume: () => child.kill('SIGCONT') };
    await delay(50);
  }
}
