// A single-member etcd of a run's own (Debian's etcd-server): on free loopback ports, its data in a fresh
// temporary directory, stopped and its data removed at the end of the run, or when the run is interrupted.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { EtcdUnavailableError } from './errors.js';
/** A loopback port nothing listens on (the kernel handed it out and it was closed again). */
export async function freeLoopbackPort() {
    const server = createServer();
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address();
    await new Promise((resolve) => server.close(resolve));
    return port;
}
const stderrTail = 2_000;
/** A single member answers within a second or two; a minute only ends a start that went wrong. */
const startTimeoutMs = 60_000;
const probeTimeoutMs = 2_000;
async function healthy(url) {
    return fetch(`${url}/health`, { signal: AbortSignal.timeout(probeTimeoutMs) }).then(async (response) => response.ok && (await response.json()).health === 'true', () => false);
}
/** Starts etcd and resolves once it answers healthy; throws `EtcdUnavailableError` when it is not installed or does not start. */
export async function startLocalEtcd(options) {
    const clientPort = await freeLoopbackPort();
    let peerPort = await freeLoopbackPort();
    while (peerPort === clientPort)
        peerPort = await freeLoopbackPort();
    const url = `http://127.0.0.1:${clientPort}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    const dataDir = mkdtempSync(join(tmpdir(), 'kvreuse-local-etcd-'));
    const child = spawn('etcd', [
        '--name=kvreuse',
        `--data-dir=${dataDir}`,
        `--listen-client-urls=${url}`,
        `--advertise-client-urls=${url}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=kvreuse=${peer}`,
        '--logger=zap',
        '--log-level=error',
    ], { env: options.env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr = (stderr + chunk.toString()).slice(-stderrTail)));
    const exited = new Promise((resolve) => child.once('close', () => resolve()));
    // Its data is thrown away with it: SIGKILL, so that a stop never waits on etcd's own shutdown.
    const end = async () => {
        if (child.exitCode === null && child.signalCode === null)
            child.kill('SIGKILL');
        await exited;
        rmSync(dataDir, { recursive: true, force: true });
    };
    const takeBack = options.whenInterrupted?.(end) ?? (() => undefined);
    const stop = async () => {
        takeBack();
        await end();
    };
    const spawned = await new Promise((resolve) => {
        child.once('spawn', () => resolve(undefined));
        child.once('error', resolve);
    });
    if (spawned !== undefined) {
        takeBack();
        rmSync(dataDir, { recursive: true, force: true });
        const missing = spawned.code === 'ENOENT' ? 'no etcd executable on PATH' : `etcd could not be run: ${spawned.message}`;
        throw new EtcdUnavailableError(options.command, missing, { cause: spawned });
    }
    const deadline = performance.now() + startTimeoutMs;
    for (;;) {
        if (await healthy(url))
            return { url, pid: child.pid, dataDir, stop };
        const ended = child.exitCode !== null || child.signalCode !== null;
        if (ended || performance.now() > deadline) {
            await stop();
            const why = ended ? `etcd exited with ${child.signalCode ?? `code ${child.exitCode}`}` : `etcd did not answer within ${startTimeoutMs} ms`;
            const said = stderr.trim().split('\n').at(-1) ?? '';
            throw new EtcdUnavailableError(options.command, `${why} before it served ${url}${said === '' ? '' : `: ${said}`}`);
        }
        await delay(50);
    }
}
