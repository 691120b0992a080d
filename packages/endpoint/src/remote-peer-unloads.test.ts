// The peers of remote workers that restarted, unloaded from this rank's agent: real loopback agents in this
// process over a memory discovery store, a serving decode worker of TP 2 and a prefill worker of TP 1.
import { MemoryDiscoveryStore } from '@kvreuse/discovery';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  allReady,
  hintFor,
  openWorker,
  start,
  type TestWorker,
  transport,
  type WorkerSpec,
} from '../test/support/endpoint-workers.js';
import { deferred } from './deferred.js';
import type { PinAdapter } from './pin-adapter.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  expect(transport.counters()).toMatchObject({ liveAgents: 0, livePeers: 0, liveOperations: 0 });
});

const RESTARTS = 4;
const decodeSpec: WorkerSpec = { workerId: 'decode-0', role: 'decode', tpSize: 2, serve: true };
const prefillSpec: WorkerSpec = { workerId: 'prefill-0', role: 'prefill', tpSize: 1 };

async function ready(store: MemoryDiscoveryStore, spec: WorkerSpec): Promise<TestWorker> {
  const worker = await openWorker(store, spec, cleanups);
  await start(worker);
  await allReady(worker);
  return worker;
}

/** Closes every rank of `worker` and opens, publishes and readies its next incarnation. */
async function restart(store: MemoryDiscoveryStore, worker: TestWorker, spec: WorkerSpec): Promise<TestWorker> {
  for (const { endpoint } of worker.ranks) await endpoint.close();
  return ready(store, spec);
}

async function pullAll(reader: TestWorker, source: TestWorker, blocks = 4): Promise<number> {
  const { endpoint } = reader.ranks[0]!;
  const receipt = await endpoint.pull({
    hint: hintFor(source, blocks),
    destinationBlocks: Uint32Array.from({ length: blocks }, (_, i) => i),
  });
  await endpoint.pinsReleased();
  return receipt.blocks;
}

async function openStore(): Promise<MemoryDiscoveryStore> {
  const store = new MemoryDiscoveryStore();
  cleanups.push(() => store.close());
  return store;
}

describe('peers of restarted remote workers', () => {
  it('a reader unloads the peers of a source that restarted: only its current incarnation stays loaded', async () => {
    const store = await openStore();
    let decode = await ready(store, decodeSpec);
    const prefill = await ready(store, prefillSpec);
    const reader = prefill.ranks[0]!.agent;
    for (let restarts = 0; restarts < RESTARTS; restarts++) {
      expect(await pullAll(prefill, decode)).toBe(4);
      decode = await restart(store, decode, decodeSpec);
    }
    expect(await pullAll(prefill, decode)).toBe(4);
    expect(reader.counters().livePeers).toBe(2);
    expect(reader.peers().map((peer) => peer.name)).toEqual(decode.ranks.map(({ agent }) => agent.name));
    // Their fencing records went with them.
    expect(prefill.ranks[0]!.endpoint.peers.names().sort()).toEqual(decode.ranks.map(({ agent }) => agent.name).sort());
  });

  it('a source unloads the peers of a reader that restarted: only its current incarnation stays loaded', async () => {
    const store = await openStore();
    const decode = await ready(store, decodeSpec);
    let prefill = await ready(store, prefillSpec);
    for (let restarts = 0; restarts < RESTARTS; restarts++) {
      expect(await pullAll(prefill, decode)).toBe(4);
      prefill = await restart(store, prefill, prefillSpec);
    }
    expect(await pullAll(prefill, decode)).toBe(4);
    for (const { agent } of decode.ranks) {
      expect(agent.counters().livePeers).toBe(1);
      expect(agent.peers().map((peer) => peer.name)).toEqual([prefill.ranks[0]!.agent.name]);
    }
  });

  it("keeps the reader of an old incarnation's pin that is partway (resolved, its checksums not yet computed) until it is given back", async () => {
    const store = await openStore();
    const decode = await ready(store, decodeSpec);
    const old = await ready(store, prefillSpec);
    // The old reader's pin at each source rank waits in its adapter, after its reader was resolved.
    const adapterAnswers = deferred<void>();
    const waiting: Promise<void>[] = [];
    for (const { pool } of decode.ranks) {
      const requestPin = pool.requestPin.bind(pool);
      const reached = deferred<void>();
      waiting.push(reached.promise);
      const held = vi.spyOn(pool as PinAdapter, 'requestPin').mockImplementationOnce(async (pinId, hashes) => {
        reached.resolve();
        await adapterAnswers.promise;
        return requestPin(pinId, hashes);
      });
      cleanups.push(async () => held.mockRestore());
    }
    const oldPull = pullAll(old, decode);
    await Promise.all(waiting);
    const current = await ready(store, prefillSpec);
    expect(await pullAll(current, decode)).toBe(4);
    adapterAnswers.resolve();
    expect(await oldPull).toBe(4);
    for (const { endpoint } of old.ranks) await endpoint.close();
    expect(await pullAll(current, decode)).toBe(4);
    for (const { agent } of decode.ranks)
      expect(agent.peers().map((peer) => peer.name)).toEqual([current.ranks[0]!.agent.name]);
  });
});
