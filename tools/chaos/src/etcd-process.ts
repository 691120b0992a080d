// A single-member etcd of one run that the runner can kill (SIGKILL) and start again on the same ports
// and data directory, as a restarted etcd server is.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { reservePorts } from '@kvreuse-internal/test-support';

export class EtcdProcess {
  readonly url: string;
  readonly #args: readonly string[];
  readonly #dataDir: string;
  #child: ChildProcess | undefined;
  #stderr = '';

  private constructor(clientPort: number, peerPort: number) {
    this.url = `http://127.0.0.1:${clientPort}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    this.#dataDir = mkdtempSync(join(tmpdir(), 'kvreuse-chaos-etcd-'));
    this.#args = [
      '--name=chaos',
      `--data-dir=${this.#dataDir}`,
      `--listen-client-urls=${this.url}`,
      `--advertise-client-urls=${this.url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=chaos=${peer}`,
      '--log-level=error',
    ];
  }

  /** Starts etcd on free loopback ports and resolves once it answers healthy (within `timeoutMs`). */
  static async start(timeoutMs: number): Promise<EtcdProcess> {
    // Its ports stay its own while it is down between a kill and a restart.
    const clientPort = await reservePorts(2);
    const peerPort = clientPort + 1;
    const etcd = new EtcdProcess(clientPort, peerPort);
    await etcd.restart(timeoutMs);
    return etcd;
  }

  /** Starts it (again) with the same ports and data; resolves once it answers healthy. */
  async restart(timeoutMs: number): Promise<void> {
    const child = spawn('etcd', this.#args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.#child = child;
    child.stderr?.on('data', (chunk: Buffer) => (this.#stderr = (this.#stderr + chunk.toString()).slice(-2_000)));
    const until = performance.now() + timeoutMs;
    while (performance.now() < until) {
      if (child.exitCode !== null) throw new Error(`etcd exited with ${child.exitCode}: ${this.#stderr}`);
      const health = await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(1_000) }).then(
        async (response) => response.ok && ((await response.json()) as { health?: string }).health === 'true',
        () => false,
      );
      if (health) return;
      await delay(50);
    }
    throw new Error(`etcd did not answer healthy on ${this.url} within ${timeoutMs} ms: ${this.#stderr}`);
  }

  /** SIGKILL, as a crash of the server; resolves once it has exited. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** Kills it and removes its data. */
  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.#dataDir, { recursive: true, force: true });
  }
}
