// Starts a real etcd (Debian's etcd-server) for a test: loopback only, free ports, a temp data dir.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { get } from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { CertificateFiles } from './certificates.js';
import { reservePorts } from './ports.js';
import { stopProcess } from './stopped-process.js';

export const etcdBinary = [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/local/bin']
  .filter((dir) => dir !== '')
  .map((dir) => join(dir, 'etcd'))
  .find((path) => existsSync(path));

/** In CI a missing etcd fails the suite; elsewhere the etcd tests are skipped. */
export const etcdRequired = process.env.CI !== undefined && process.env.CI !== '' && process.env.CI !== 'false';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An etcd process (the server or a gRPC proxy) that the test starts, kills and restarts. */
abstract class EtcdProcess {
  private process: ChildProcess | undefined;
  private log = '';

  constructor(readonly dataDir: string) {}

  /** Where clients connect. */
  abstract get url(): string;

  /** The running process's id; undefined once it was killed. */
  get pid(): number | undefined {
    return this.process?.exitCode === null ? this.process.pid : undefined;
  }
  protected abstract args(): string[];

  /** Whether the process answers `/health` with `true`. */
  protected async healthy(): Promise<boolean> {
    const response = await fetch(`${this.url}/health`);
    return response.ok && ((await response.json()) as { health?: string }).health === 'true';
  }

  /** Starts the process (again) with the same ports and data, and waits until it serves. */
  async restart(): Promise<void> {
    const child = spawn(etcdBinary!, this.args(), { stdio: ['ignore', 'ignore', 'pipe'] });
    this.process = child;
    child.stderr?.on('data', (chunk: Buffer) => {
      this.log = (this.log + chunk.toString()).slice(-4000);
    });
    for (let attempt = 0; attempt < 300; attempt++) {
      if (child.exitCode !== null) throw new Error(`etcd exited with ${child.exitCode}: ${this.log}`);
      try {
        if (await this.healthy()) return;
      } catch {
        // not listening yet
      }
      await sleep(50);
    }
    throw new Error(`etcd did not become healthy on ${this.url}: ${this.log}`);
  }

  /** Kills the process at once (SIGKILL), as a crash would. */
  async kill(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (child === undefined || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  /** Freezes the process (SIGSTOP) and resolves once none of its threads runs: its connections stay open and nothing answers. */
  async pause(): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) throw new Error(`no etcd process runs on ${this.url} to pause`);
    await stopProcess(pid);
  }

  resume(): void {
    this.process?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/**
 * A server that serves its clients over TLS with `server`'s certificate and, with `clientCa`,
 * accepts only clients that present a certificate that authority signed.
 */
export interface EtcdServerTls {
  readonly server: CertificateFiles;
  readonly clientCa?: string;
  /** The authority that signed `server`, and a client certificate: what the health check connects with. */
  readonly probe: { readonly caFile: string; readonly client?: CertificateFiles };
}

export class EtcdServer extends EtcdProcess {
  private constructor(
    readonly clientPort: number,
    readonly peerPort: number,
    dataDir: string,
    private readonly tls: EtcdServerTls | undefined,
  ) {
    super(dataDir);
  }

  get url(): string {
    return `${this.tls === undefined ? 'http' : 'https'}://127.0.0.1:${this.clientPort}`;
  }

  static async start(tls?: EtcdServerTls): Promise<EtcdServer> {
    if (etcdBinary === undefined) throw new Error('etcd is not installed (apt-get install etcd-server)');
    // Its ports stay its own while it is down between a kill and a restart.
    const clientPort = await reservePorts(2);
    const peerPort = clientPort + 1;
    const server = new EtcdServer(clientPort, peerPort, mkdtempSync(join(tmpdir(), 'kvreuse-etcd-')), tls);
    await server.restart();
    return server;
  }

  protected override healthy(): Promise<boolean> {
    const tls = this.tls;
    if (tls === undefined) return super.healthy();
    const { caFile, client } = tls.probe;
    const files = {
      ca: readFileSync(caFile),
      ...(client === undefined ? {} : { cert: readFileSync(client.certFile), key: readFileSync(client.keyFile) }),
    };
    return new Promise((resolve, reject) => {
      get(`${this.url}/health`, files, (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () =>
          resolve(response.statusCode === 200 && (JSON.parse(body) as { health?: string }).health === 'true'),
        );
      }).on('error', reject);
    });
  }

  protected args(): string[] {
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const tls = this.tls;
    return [
      '--name=kvreuse-test',
      `--data-dir=${this.dataDir}`,
      `--listen-client-urls=${this.url}`,
      `--advertise-client-urls=${this.url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=kvreuse-test=${peer}`,
      '--logger=zap',
      '--log-level=error',
      ...(tls === undefined ? [] : [`--cert-file=${tls.server.certFile}`, `--key-file=${tls.server.keyFile}`]),
      ...(tls?.clientCa === undefined ? [] : ['--client-cert-auth', `--trusted-ca-file=${tls.clientCa}`]),
    ];
  }
}

/**
 * `etcd grpc-proxy` in front of a server: a client that connects through it is cut off from etcd
 * when the proxy is killed, while clients connected to the server directly go on changing it.
 */
export class EtcdProxy extends EtcdProcess {
  private constructor(
    private readonly server: EtcdServer,
    readonly port: number,
    dataDir: string,
  ) {
    super(dataDir);
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  static async start(server: EtcdServer): Promise<EtcdProxy> {
    const proxy = new EtcdProxy(server, await reservePorts(1), mkdtempSync(join(tmpdir(), 'kvreuse-etcd-proxy-')));
    await proxy.restart();
    return proxy;
  }

  protected args(): string[] {
    return [
      'grpc-proxy',
      'start',
      `--endpoints=127.0.0.1:${this.server.clientPort}`,
      `--listen-addr=127.0.0.1:${this.port}`,
      `--advertise-client-url=127.0.0.1:${this.port}`,
      `--data-dir=${this.dataDir}`,
    ];
  }
}

/** Whether the etcd tests run here: etcd is installed, or CI requires them (and they fail without it). */
export const etcdRuns = etcdBinary !== undefined || etcdRequired;
