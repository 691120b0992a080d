import { setTimeout as sleep } from 'node:timers/promises';
import { stopProcess } from '@kvreuse-internal/test-support';
import { describe, expect, it } from 'vitest';
import { agentName, transport, ucxTestsRun } from './support/backends.js';
import { spawnScript } from './support/child.js';
import { findPatternMismatch, piecewiseDescriptors } from './support/content.js';
import { allZero, liveCounters } from './support/pair.js';

const SEED = 0x4b7;
const PIECES = 64;
const PIECE_BYTES = 128 << 10;
const BYTES = PIECES * PIECE_BYTES;

/** UCX reads UCX_TLS when an agent's context is created: `tls` for the agents created inside `create`. */
async function withTls<T>(tls: string, create: () => Promise<T>): Promise<T> {
  const before = process.env['UCX_TLS'];
  process.env['UCX_TLS'] = tls;
  try {
    return await create();
  } finally {
    if (before === undefined) delete process.env['UCX_TLS'];
    else process.env['UCX_TLS'] = before;
  }
}

describe.runIf(ucxTestsRun)('heartbeat between two processes on ucx', () => {
  it('reports a SIGSTOPped peer with a read in flight over tcp as unresponsive, and as responsive once it resumes; the read then completes', async () => {
    const sourceName = agentName('heartbeat-source');
    // The benchmarks' source process: one patterned bank, published; closes on request.
    const source = spawnScript('test/support/source-process.ts', {
      args: [sourceName, String(BYTES), String(SEED)],
      env: { UCX_TLS: 'tcp' },
    });
    const pid = source.process.pid ?? 0;
    // Ten intervals of grace: the live source answers well within them, however loaded the machine.
    const heartbeat = { heartbeatIntervalMs: 50, heartbeatMisses: 10 };
    const reader = await withTls('tcp', () =>
      transport.createAgent({ name: agentName('heartbeat-reader'), backend: 'ucx', heartbeat }),
    );
    const bank = await reader.allocate(BYTES);
    const region = reader.register(bank);
    try {
      const ready = await source.next<{ metadata: string; region: number }>('ready');
      const peer = reader.loadPeer(Buffer.from(ready.metadata, 'base64'));
      expect(peer.transport()).toMatch(/tcp/);
      // Watched, it is probed; it is judged once it has answered.
      peer.watch();
      while (reader.counters().heartbeatAnswers === 0) await sleep(10);

      await stopProcess(pid);
      const operation = reader.post({
        direction: 'read',
        peer,
        descriptors: piecewiseDescriptors(PIECES, PIECE_BYTES),
        localRegions: [region],
        remoteRegions: [ready.region],
      });
      const unresponsive = await reader.nextPeerEvent();
      expect(unresponsive).toMatchObject({ type: 'peer-unresponsive', peer, peerName: sourceName });
      expect(unresponsive.silentMs).toBeGreaterThanOrEqual(heartbeat.heartbeatIntervalMs * heartbeat.heartbeatMisses);
      // A report only: the read is still in flight, the peer still ready.
      expect(operation.status().state).toBe('in-progress');
      expect(peer.info().state).toBe('ready');
      expect(reader.counters()).toMatchObject({ unresponsivePeers: 1, inflightOperations: 1 });

      process.kill(pid, 'SIGCONT');
      const responsive = await reader.nextPeerEvent();
      expect(responsive).toMatchObject({ type: 'peer-responsive', peer, peerName: sourceName });
      await expect(operation.done).resolves.toEqual({ bytesDone: BYTES });
      expect(findPatternMismatch(bank.view(), SEED)).toBe(-1);
      expect(reader.pollPeerEvents()).toEqual([]);
      operation.release();
      peer.unwatch();
      peer.unload();

      source.send({ command: 'close' });
      await source.next('closed');
      expect(await source.exited).toBe(0);
    } finally {
      source.process.kill('SIGCONT');
      source.process.kill();
      await region.deregister();
      await bank.free();
      await reader.close();
    }
    expect(liveCounters()).toEqual(allZero);
  }, 60_000);
});
