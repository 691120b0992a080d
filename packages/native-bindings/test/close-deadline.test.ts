// agent.close() against a peer process that is stopped (SIGSTOP): the close never blocks the JavaScript
// thread and is ended by its own deadline — over tcp by force-closing the endpoint the stopped peer never
// acknowledges (the outcome names both agents and the deadline), over shared memory gracefully.
import { stopProcess } from '@kvreuse-internal/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { NativeTransportError } from '../src/errors.js';
import { agentName, transport, ucxTestsRun } from './support/backends.js';
import { type Child, spawnScript } from './support/child.js';
import { allZero, liveCounters } from './support/pair.js';

const BYTES = 1 << 20;
const DEADLINE_MS = 500;

const children: Child[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) {
    child.process.kill('SIGKILL');
    await child.exited;
  }
});

/**
 * A reader that read from a source process and sent it a notification, then stopped the source (and sent
 * another). `tls` is UCX_TLS for both (undefined: UCX's choice, shared memory between two processes).
 */
async function readerOfAStoppedSource(tls: string | undefined) {
  const env = tls === undefined ? {} : { UCX_TLS: tls };
  const sourceName = agentName('stopped-source');
  const child = spawnScript('test/support/source-process.ts', { args: [sourceName, String(BYTES), '7'], env });
  children.push(child);
  const published = await child.next<{ metadata: string; region: number }>('ready');
  const previous = process.env['UCX_TLS'];
  if (tls !== undefined) process.env['UCX_TLS'] = tls;
  const reader = await transport.createAgent({ name: agentName('closing-reader'), backend: 'ucx' });
  if (previous === undefined) delete process.env['UCX_TLS'];
  else process.env['UCX_TLS'] = previous;
  const bank = await reader.allocate(BYTES);
  const region = reader.register(bank);
  const peer = reader.loadPeer(Buffer.from(published.metadata, 'base64'));
  const operation = reader.post({
    direction: 'read',
    peer,
    descriptors: {
      sourceBank: Uint32Array.of(0),
      sourceOffset: BigUint64Array.of(0n),
      destinationBank: Uint32Array.of(0),
      destinationOffset: BigUint64Array.of(0n),
      length: BigUint64Array.of(4096n),
    },
    localRegions: [region],
    remoteRegions: [published.region],
  });
  await expect(operation.done).resolves.toMatchObject({ bytesDone: 4096 });
  operation.release();
  await region.deregister();
  await bank.free();
  reader.sendNotification(peer, 'before');
  const pid = child.process.pid ?? 0;
  await stopProcess(pid);
  reader.sendNotification(peer, 'after');
  return { reader, sourceName, path: peer.transport() };
}

describe.runIf(ucxTestsRun)('agent.close() with a stopped peer', () => {
  it('over tcp: the JavaScript thread runs on meanwhile, and the close ends at its deadline with the endpoint force-closed', async () => {
    const { reader, sourceName, path } = await readerOfAStoppedSource('tcp');
    expect(path).toMatch(/tcp\//);
    const events: string[] = [];
    const closing = reader.close({ deadlineMs: DEADLINE_MS }).then((outcome) => {
      events.push('closed');
      return outcome;
    });
    setTimeout(() => events.push('timer'), 0);
    const { forced } = await closing;
    // The timer's turn came while the close was pending: nothing held the thread.
    expect(events).toEqual(['timer', 'closed']);
    expect(forced).toBeInstanceOf(NativeTransportError);
    expect(forced).toMatchObject({ code: 'TIMEOUT', call: 'kvt_agent_shutdown' });
    expect(forced?.detail).toContain(`'${reader.name}'`);
    expect(forced?.detail).toContain(`'${sourceName}'`);
    // Had UCX given up on the stopped peer first, the endpoint would have failed and the outcome been graceful.
    expect(forced?.detail).toContain(`the shutdown's deadline of ${DEADLINE_MS} ms passed`);
    expect(reader.isOpen).toBe(false);
    expect(liveCounters()).toEqual(allZero);
  }, 60_000);

  it('over shared memory: the flush needs nothing of the stopped peer, so the close ends gracefully', async () => {
    const { reader, path } = await readerOfAStoppedSource(undefined);
    expect(path).toMatch(/posix\/memory/);
    await expect(reader.close({ deadlineMs: DEADLINE_MS })).resolves.toEqual({ forced: undefined });
    expect(liveCounters()).toEqual(allZero);
  }, 60_000);
});
