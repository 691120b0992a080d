// Source and reader on two loopback agents, each agent's notifications routed to its side as they
// arrive: a reader pins, the source's shutdown waits for it, the reader releases, the shutdown goes on.
import { ClusterSecret } from '@kvreuse/discovery';
import { type Agent, loadTransport, type Notification } from '@kvreuse/native-bindings';
import { afterEach, describe, expect, it } from 'vitest';
import { BlockPool, PinChannel, PinClient, PinServer } from '../src/index.js';
import { ManualClock } from './support/manual-clock.js';

const transport = loadTransport();
const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

async function route(agent: Agent, receive: (notification: Notification) => unknown): Promise<void> {
  for await (const notification of agent.notifications()) await receive(notification);
}

describe('pins between two loopback agents', () => {
  it('a source shutdown waits for the reader to release its pin, then reports it released', async () => {
    const sourceAgent = await transport.createAgent({ name: `pins-e2e-source-${process.pid}`, backend: 'loopback' });
    const readerAgent = await transport.createAgent({ name: `pins-e2e-reader-${process.pid}`, backend: 'loopback' });
    agents.push(sourceAgent, readerAgent);
    const readerPeer = sourceAgent.loadPeer(readerAgent.metadata());
    const sourcePeer = readerAgent.loadPeer(sourceAgent.metadata());
    const pool = new BlockPool(3);
    const hashes = [21n, 22n, 23n];
    for (const hash of hashes) pool.commit(pool.allocate(), hash);
    const clock = new ManualClock();
    const source = { workerId: 'prefill-0', incarnation: 'inc-a', epoch: 2, rank: { tpRank: 0, ppRank: 0 } };
    const secret = ClusterSecret.ofThisProcess();
    const sourceChannel = new PinChannel({ agent: sourceAgent, secret });
    const readerChannel = new PinChannel({ agent: readerAgent, secret });
    const server = new PinServer({
      channel: sourceChannel,
      adapter: pool,
      source,
      resolvePeer: () => Promise.resolve(readerPeer),
      checksums: (_request, blocks) => blocks.map(() => 0),
      leaseMs: 10_000,
      clock,
    });
    const client = new PinClient({
      channel: readerChannel,
      reader: { workerId: 'decode-0', incarnation: 'inc-b', rank: { tpRank: 0, ppRank: 0 } },
      answerTimeoutMs: 60_000,
      clock,
    });
    const routing = [
      route(sourceAgent, (notification) => server.receive(notification)),
      route(readerAgent, (notification) => client.receive(notification)),
    ];

    const pin = await client.pin({
      peer: sourcePeer,
      source,
      start: 0,
      hashes: BigUint64Array.from(hashes),
      wantsChecksums: false,
    });
    expect(pin.positions).toEqual({ start: 0, count: 3 });
    expect(() => pool.allocate()).toThrow('all 3 blocks are pinned');

    const waiting = server.waitForReaders({
      deadlineAt: 30_000,
      timeoutMs: 30_000,
      signal: new AbortController().signal,
    });
    await pin.release();
    expect(await waiting).toMatchObject({
      released: 1,
      lapsed: 0,
      outstanding: 0,
      pins: [{ pinId: pin.pinId, readerAgent: readerAgent.name, blocks: 3, ended: 'released' }],
    });
    expect(pool.allocate()).toBe(0);
    expect(server.malformedMessages + client.malformedMessages).toBe(0);
    expect(sourceChannel.refusedMessages).toEqual({
      unauthenticated: 0,
      malformed: 0,
      'not-reader': 0,
      'not-source': 0,
      replayed: 0,
    });
    expect(readerChannel.refusedMessages).toEqual(sourceChannel.refusedMessages);

    await Promise.all(agents.splice(0).map((agent) => agent.close()));
    await Promise.all(routing);
  });
});
