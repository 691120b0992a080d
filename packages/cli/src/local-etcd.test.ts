import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectEtcdDiscovery } from '@kvreuse/discovery';
import { createServer, type Server } from 'node:http';
import { reservePorts } from '@kvreuse-internal/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { EtcdUnavailableError } from './errors.js';
import type { WhenInterrupted } from './interrupts.js';
import { startLocalEtcd } from './local-etcd.js';

const emptyPath = mkdtempSync(join(tmpdir(), 'kvreuse-cli-no-etcd-'));
afterAll(() => rmSync(emptyPath, { recursive: true, force: true }));

/** Whether a process with this pid exists (signal 0 checks without signalling). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/** Records what is registered for an interruption, and what is taken back. */
function recordedInterrupts(): { whenInterrupted: WhenInterrupted; registered: Set<() => Promise<void>> } {
  const registered = new Set<() => Promise<void>>();
  return {
    registered,
    whenInterrupted: (cleanup) => {
      registered.add(cleanup);
      return () => registered.delete(cleanup);
    },
  };
}

/** An HTTP server on `port` that answers /health as a healthy etcd does, and nothing else: another etcd, to a probe. */
async function healthyStranger(port: number): Promise<Server> {
  const server = createServer((request, response) => {
    if (request.url === '/health') response.end('{"health":"true"}');
    else response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

describe('startLocalEtcd', () => {
  it('starts an etcd on loopback that serves discovery; stop ends the process, removes its data and takes back its interrupt cleanup', async () => {
    const interrupts = recordedInterrupts();
    const etcd = await startLocalEtcd({
      command: 'demo',
      env: process.env,
      whenInterrupted: interrupts.whenInterrupted,
    });
    expect(etcd.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(interrupts.registered.size).toBe(1);
    const store = connectEtcdDiscovery({ hosts: etcd.url });
    try {
      await store.put('kvreuse/test', 'served');
      expect(new TextDecoder().decode((await store.get('kvreuse/test'))?.value)).toBe('served');
    } finally {
      await store.close();
    }
    expect([alive(etcd.pid), existsSync(etcd.dataDir)]).toEqual([true, true]);
    await etcd.stop();
    expect([alive(etcd.pid), existsSync(etcd.dataDir)]).toEqual([false, false]);
    expect(interrupts.registered.size).toBe(0);
  }, 30_000);

  it('an interruption runs the cleanup it registered: the process ends and its data is removed', async () => {
    const interrupts = recordedInterrupts();
    const etcd = await startLocalEtcd({
      command: 'demo',
      env: process.env,
      whenInterrupted: interrupts.whenInterrupted,
    });
    const [cleanup] = interrupts.registered;
    await cleanup!();
    expect([alive(etcd.pid), existsSync(etcd.dataDir)]).toEqual([false, false]);
    await etcd.stop();
  }, 30_000);

  it('a port taken before etcd bound it, by a server that answers /health as etcd does: etcd is started again on other ports, and serves', async () => {
    const takenPort = await reservePorts(2);
    const stranger = await healthyStranger(takenPort);
    const tries: (readonly [number, number])[] = [];
    try {
      const etcd = await startLocalEtcd({
        command: 'demo',
        env: process.env,
        ports: async () => {
          const first = await reservePorts(2);
          tries.push(tries.length === 0 ? [takenPort, takenPort + 1] : [first, first + 1]);
          return tries.at(-1)!;
        },
      });
      try {
        expect(tries).toHaveLength(2);
        expect(etcd.url).toBe(`http://127.0.0.1:${tries[1]![0]}`);
        const store = connectEtcdDiscovery({ hosts: etcd.url });
        await store.put('kvreuse/test', 'ours');
        expect(new TextDecoder().decode((await store.get('kvreuse/test'))?.value)).toBe('ours');
        await store.close();
      } finally {
        await etcd.stop();
      }
    } finally {
      await new Promise((resolve) => stranger.close(resolve));
    }
  }, 60_000);

  it('its port taken at every try: EtcdUnavailableError saying the address is in use, after three tries', async () => {
    const takenPort = await reservePorts(2);
    const stranger = await healthyStranger(takenPort);
    let tries = 0;
    try {
      const starting = startLocalEtcd({
        command: 'demo',
        env: process.env,
        ports: async () => {
          tries++;
          return [takenPort, takenPort + 1];
        },
      });
      await expect(starting).rejects.toThrow(EtcdUnavailableError);
      await expect(starting).rejects.toThrow('address already in use');
      expect(tries).toBe(3);
    } finally {
      await new Promise((resolve) => stranger.close(resolve));
    }
  }, 60_000);

  it('without etcd on PATH: EtcdUnavailableError naming the missing executable and how to install it, nothing left registered', async () => {
    const interrupts = recordedInterrupts();
    const starting = startLocalEtcd({
      command: 'demo',
      env: { PATH: emptyPath },
      whenInterrupted: interrupts.whenInterrupted,
    });
    await expect(starting).rejects.toThrow(EtcdUnavailableError);
    await expect(starting).rejects.toMatchObject({
      code: 'ETCD_UNAVAILABLE',
      exitCode: 1,
      message: expect.stringContaining(
        ': no etcd executable on PATH; install it with sudo apt-get install -y etcd-server',
      ),
    });
    expect(interrupts.registered.size).toBe(0);
  });
});
