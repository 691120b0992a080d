import { referenceGeometries } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import { describe, expect, it, vi } from 'vitest';
import { watchWorkerReadiness, type WorkerReadiness } from '../src/index.js';
import { localBackends } from './helpers/stores.js';
import { prepareWorker, registerAndPublish, tearDownWorker, type WorkerSetup } from './helpers/worker.js';

const transport = loadTransport();

describe.each(localBackends)('a Qwen3-0.6B TP=2 worker from registration to readiness on $name discovery', (backend) => {
  it('registers 56 banks per rank, publishes parts whose metadata a peer can load, and becomes ready', async () => {
    const { store, dispose } = backend.open();
    const setup: WorkerSetup = { transport, backend: 'loopback', workerId: `decode-${backend.name}`, incarnation: 'inc-1', geometry: referenceGeometries['qwen3-0.6b'], tpSize: 2, blocks: 2 };
    const seen: WorkerReadiness[] = [];
    const watch = await watchWorkerReadiness(store, setup.workerId, { onChange: (readiness) => seen.push(readiness) });
    const prepared = prepareWorker(setup);
    const lease = await store.grantLease(60_000);
    const ranks = await registerAndPublish(setup, prepared, store, lease.id);

    await vi.waitFor(() => expect(watch.current.ready).toBe(true), { timeout: 20_000, interval: 5 });
    const readiness = watch.current;
    if (!readiness.ready) throw new Error('unreachable');
    expect(readiness.worker.ranks.map((part) => part.banks.length)).toEqual([56, 56]);
    expect(seen.map((change) => change.ready)).toEqual([false, true]);

    // The published transport metadata is the agent's real blob: another agent loads it and sees 56 regions.
    const reader = transport.createAgent({ name: `reader-${backend.name}-${process.pid}`, backend: 'loopback' });
    const part = readiness.worker.ranks[1]!;
    const peer = reader.loadPeer(Buffer.from(part.transport.metadata, 'base64'));
    expect(peer.info().regionCount).toBe(56);
    expect(part.transport).toMatchObject({ agentName: prepared[1]!.agent.name, generation: 57 });
    expect(part.banks.map((bank) => bank.address)).toEqual(prepared[1]!.banks.map((bank) => bank.address));
    peer.unload();
    reader.close();

    await store.revokeLease(lease.id);
    await vi.waitFor(() => expect(watch.current.ready).toBe(false), { timeout: 20_000, interval: 5 });
    await watch.close();
    await tearDownWorker(prepared, ranks);
    expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveAgents: 0 });
    await dispose();
  });
});
