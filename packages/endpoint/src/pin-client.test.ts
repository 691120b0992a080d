import { setTimeout as sleep } from 'node:timers/promises';
import type { Agent, HeartbeatOptions, Peer, PeerEvent } from '@kvreuse/native-bindings';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { answered, loopbackPins, transport } from '../test/support/loopback-pins.js';
import { holdUntilNotificationWaits } from '../test/support/held-thread.js';
import { nextTurn } from '../test/support/next-turn.js';
import { PinChannel } from './pin-auth.js';
import {
  EndpointOptionError,
  PinRefusedError,
  PinTimeoutError,
  ReaderClosedError,
  SourceUnresponsiveError,
} from './errors.js';
import { PinClient, type PinClientOptions } from './pin-client.js';
import { encodePinMessage } from './pin-messages.js';
import { NotificationRouter } from './notification-router.js';
import { PinServer } from './pin-server.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

const sourceIdentity = { workerId: 'src', incarnation: 'inc-1', epoch: 1, rank: { tpRank: 1, ppRank: 0 } };

/** A source rank serving pins from a block pool and a reader pinning on it, on two loopback agents; each side's messages are handed over one at a time. */
async function pair(heartbeat?: HeartbeatOptions, clientOptions: Pick<PinClientOptions, 'onHeldChange'> = {}) {
  const { sourceAgent, readerAgent, readerPeer, sourcePeer, sourceChannel, readerChannel, pool, clock, secret } =
    await loopbackPins('pin-client', agents, heartbeat);
  const server = new PinServer({
    channel: sourceChannel,
    adapter: pool,
    source: sourceIdentity,
    resolvePeer: () => Promise.resolve(readerPeer),
    checksums: (_request, blocks) => blocks.map((block) => block * 7),
    leaseMs: 900,
    clock,
  });
  const client = new PinClient({
    channel: readerChannel,
    reader: { workerId: 'dst', incarnation: 'r-1', rank: { tpRank: 0, ppRank: 0 } },
    answerTimeoutMs: 500,
    clock,
    ...clientOptions,
  });
  const toSource = async () => expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
  const toReader = async () => expect(client.receive(await readerAgent.nextNotification())).toBe(true);
  const pin = async (hashes: bigint[]) => {
    const pinning = client.pin({
      peer: sourcePeer,
      source: sourceIdentity,
      start: 0,
      hashes: BigUint64Array.from(hashes),
      wantsChecksums: true,
    });
    await toSource();
    await toReader();
    return pinning;
  };
  return {
    sourceAgent,
    readerAgent,
    sourcePeer,
    readerPeer,
    sourceChannel,
    readerChannel,
    secret,
    pool,
    clock,
    server,
    client,
    toSource,
    toReader,
    pin,
  };
}

/** pair() whose reader's heartbeat runs only the rounds a test asks for, and reports the source after one miss. */
async function pairOnHeldHeartbeat() {
  const paired = await pair({ heartbeatIntervalMs: 50, heartbeatMisses: 1 });
  paired.readerAgent.faults.runHeartbeatRounds(0);
  return paired;
}

/**
 * Has the reader's held heartbeat probe the source and waits for its answer (a source is judged only once it
 * answered), stalls the source, and runs the two rounds that probe it afresh and count its one miss: the
 * report they made.
 */
async function stallSource(readerAgent: Agent, sourceAgent: Agent): Promise<PeerEvent> {
  const answers = readerAgent.counters().heartbeatAnswers;
  readerAgent.faults.runHeartbeatRounds(1);
  while (readerAgent.counters().heartbeatAnswers === answers) await sleep(1);
  sourceAgent.faults.stallProgress(true);
  readerAgent.faults.runHeartbeatRounds(2);
  const events = readerAgent.pollPeerEvents();
  expect(events).toMatchObject([{ type: 'peer-unresponsive', cause: 'silent', peerName: sourceAgent.name }]);
  return events[0] as PeerEvent;
}

/** Asks `client` to pin the one block of hash 10 on `sourcePeer`, without checksums. */
function askForBlock10(client: PinClient, sourcePeer: Peer) {
  return client.pin({
    peer: sourcePeer,
    source: sourceIdentity,
    start: 0,
    hashes: BigUint64Array.of(10n),
    wantsChecksums: false,
  });
}

const noRefusals = { unauthenticated: 0, malformed: 0, 'not-reader': 0, 'not-source': 0, replayed: 0 };

describe('PinClient', () => {
  it('pins the held prefix, renews it on its clock past the lease, and releases it with an acknowledgement', async () => {
    const { pool, clock, client, server, toSource, toReader, pin } = await pair();
    const held = await pin([10n, 11n, 99n]);
    expect(held).toMatchObject({
      pinId: expect.stringMatching(/^[0-9a-f]{32}$/),
      source: sourceIdentity,
      positions: { start: 0, count: 2 },
      sourceBlocks: Uint32Array.of(0, 1),
      checksums: Uint32Array.of(0, 7),
    });
    for (let round = 0; round < 4; round++) {
      clock.advance(300);
      await toSource();
      await toReader();
    }
    expect(clock.now()).toBeGreaterThan(900);
    expect(pool.pinsOn(0)).toBe(1);
    expect(server.heldPins).toBe(1);
    const releasing = held.release();
    await toSource();
    await toReader();
    await releasing;
    expect(pool.pinsOn(0)).toBe(0);
    expect(client.heldPins).toBe(0);
    await held.release();
  });

  it('renews and releases with rising sequence numbers, and ignores (counting it) a revocation without the tag', async () => {
    const { clock, client, server, readerAgent, readerPeer, sourceAgent, sourceChannel, readerChannel, pin, toReader } =
      await pair();
    const held = await pin([10n]);
    const forged = encodePinMessage({ kind: 'revoke', pinId: held.pinId, reason: 'shutting-down' });
    sourceAgent.sendNotification(readerPeer, Uint8Array.of(...forged, ...new Uint8Array(16)));
    await toReader();
    expect(client.heldPins).toBe(1);
    expect(readerChannel.refusedMessages.unauthenticated).toBe(1);
    const toSource = async (expected: object) => {
      const notification = await sourceAgent.nextNotification();
      expect(sourceChannel.open(notification)).toEqual({ pinId: held.pinId, ...expected });
      expect(await answered(server, notification)).toBe(true);
    };
    clock.advance(300);
    await toSource({ kind: 'renew', sequence: 1 });
    await toReader();
    clock.advance(300);
    await toSource({ kind: 'renew', sequence: 2 });
    await toReader();
    const releasing = held.release();
    await toSource({ kind: 'release', sequence: 3 });
    await toReader();
    await releasing;
    expect(sourceChannel.refusedMessages).toEqual(noRefusals);
    expect(readerAgent.pollNotifications()).toEqual([]);
  });

  it('rejects with the source rank refusal when nothing is held', async () => {
    const { pin } = await pair();
    const refused = pin([99n]);
    await expect(refused).rejects.toBeInstanceOf(PinRefusedError);
    await expect(refused).rejects.toThrow('source rank tp 1 pp 0 refused the pin: evicted');
  });

  it('rejects with a timeout naming the source rank when the source does not answer', async () => {
    const { client, clock, sourcePeer } = await pair();
    const pinning = askForBlock10(client, sourcePeer);
    clock.advance(500);
    await expect(pinning).rejects.toThrow(PinTimeoutError);
    await expect(pinning).rejects.toThrow('source rank tp 1 pp 0 did not answer the pin within 500 ms');
  });

  it('takes a grant that arrived before the timeout while the JavaScript thread was held, its notification not yet read', async () => {
    const { client, clock, sourcePeer, readerAgent, toSource } = await pair();
    const router = new NotificationRouter();
    router.addHandler((notification) => client.receive(notification));
    router.start(readerAgent);
    const pinning = askForBlock10(client, sourcePeer);
    await toSource();
    // Held here, synchronously, until the grant waits in the reader's agent: nothing reads it before the timeout.
    holdUntilNotificationWaits(readerAgent);
    expect(readerAgent.counters().pendingNotifications).toBe(1);
    clock.advance(500);
    expect(await pinning).toMatchObject({ positions: { start: 0, count: 1 } });
  });

  it('gives back a grant that arrives after its request timed out', async () => {
    const { client, clock, sourcePeer, pool, toSource, toReader } = await pair();
    const pinning = askForBlock10(client, sourcePeer);
    clock.advance(500);
    await expect(pinning).rejects.toThrow(PinTimeoutError);
    await toSource();
    expect(pool.pinsOn(0)).toBe(1);
    await toReader();
    await toSource();
    expect(pool.pinsOn(0)).toBe(0);
  });

  it('forgets a timed-out request an answer timeout later: its grant arriving then is ignored and lapses at the source', async () => {
    const { client, clock, server, sourcePeer, readerAgent, pool, toSource, toReader } = await pair();
    const pinning = askForBlock10(client, sourcePeer);
    clock.advance(500);
    await expect(pinning).rejects.toThrow(PinTimeoutError);
    clock.advance(500);
    await toSource();
    expect(pool.pinsOn(0)).toBe(1);
    const sent = readerAgent.counters().notificationsSent;
    await toReader();
    expect(readerAgent.counters().notificationsSent).toBe(sent);
    expect(client.heldPins).toBe(0);
    clock.advance(900);
    await nextTurn();
    expect(server.heldPins).toBe(0);
    expect(pool.pinsOn(0)).toBe(0);
  });

  it('times out a release the source does not acknowledge', async () => {
    const { clock, pin } = await pair();
    const held = await pin([10n]);
    const releasing = held.release();
    clock.advance(500);
    await expect(releasing).rejects.toThrow('did not answer the release within 500 ms');
  });

  it('closed: a request and a release awaiting their answers end at once, held pins are no longer renewed, later pins fail at once', async () => {
    const { client, clock, sourcePeer, pin, readerAgent } = await pair();
    const held = await pin([10n]);
    const releasing = (await pin([10n])).release();
    const pinning = askForBlock10(client, sourcePeer);
    client.close();
    await expect(pinning).rejects.toBeInstanceOf(ReaderClosedError);
    await expect(pinning).rejects.toThrow('this rank closed before source rank tp 1 pp 0 answered the pin');
    await expect(releasing).rejects.toMatchObject({ code: 'READER_CLOSED', operation: 'release' });
    expect(client.heldPins).toBe(0);
    const sent = readerAgent.counters().notificationsSent;
    clock.advance(900);
    await nextTurn();
    expect(readerAgent.counters().notificationsSent).toBe(sent);
    await held.release();
    await expect(askForBlock10(client, sourcePeer)).rejects.toMatchObject({ code: 'READER_CLOSED', operation: 'pin' });
    expect(readerAgent.counters().notificationsSent).toBe(sent);
  });

  it('settles lost when the source revokes the pin at its shutdown deadline', async () => {
    const { server, pin, toReader } = await pair();
    const held = await pin([10n]);
    const controller = new AbortController();
    controller.abort();
    await server.waitForReaders({ deadlineAt: 0, timeoutMs: 0, signal: controller.signal });
    await toReader();
    expect(await held.lost).toEqual({
      reason: 'shutting-down',
      detail: `pin ${held.pinId} on source rank tp 1 pp 0 of src: revoked by the source (shutting-down)`,
    });
  });

  it('pin() refuses a request of another shape with EndpointOptionError naming what is wrong', async () => {
    const { client, sourcePeer } = await pair();
    const request = {
      peer: sourcePeer,
      source: sourceIdentity,
      start: 0,
      hashes: BigUint64Array.of(10n),
      wantsChecksums: false,
    };
    await expect(client.pin(undefined as never)).rejects.toThrow(
      new EndpointOptionError('request', undefined, 'a pin request: { peer, source, start, hashes, wantsChecksums }'),
    );
    await expect(client.pin({ ...request, peer: {} as never })).rejects.toThrow(
      new EndpointOptionError('request.peer', {}, "the source rank's Peer"),
    );
    await expect(client.pin({ ...request, source: undefined as never })).rejects.toThrow(
      new EndpointOptionError('request.source', undefined, 'the source rank: { workerId, incarnation, epoch, rank }'),
    );
    await expect(client.pin({ ...request, source: { ...sourceIdentity, rank: 1 as never } })).rejects.toThrow(
      new EndpointOptionError('request.source.rank', 1, 'a rank: { tpRank, ppRank }'),
    );
    await expect(client.pin({ ...request, hashes: [10n] as never })).rejects.toThrow(
      new EndpointOptionError('request.hashes', [10n], 'the chain hashes, a BigUint64Array'),
    );
    await expect(client.pin({ ...request, wantsChecksums: 'yes' as never })).rejects.toThrow(
      new EndpointOptionError('request.wantsChecksums', 'yes', 'true or false'),
    );
    expect(client.heldPins).toBe(0);
  });

  it('refuses options of another shape with EndpointOptionError naming the option', async () => {
    const { readerChannel } = await pair();
    const options: PinClientOptions = {
      channel: readerChannel,
      reader: { workerId: 'dst', incarnation: 'r-1', rank: { tpRank: 0, ppRank: 0 } },
      answerTimeoutMs: 500,
    };
    const rule = 'PinClient options: { channel, reader, answerTimeoutMs, clock?, onHeldChange? }';
    expect(() => new PinClient(undefined as never)).toThrow(new EndpointOptionError('options', undefined, rule));
    expect(() => new PinClient(null as never)).toThrow(new EndpointOptionError('options', null, rule));
    expect(() => new PinClient(500 as never)).toThrow(new EndpointOptionError('options', 500, rule));
    expect(() => new PinClient({ ...options, channel: {} as never })).toThrow(
      new EndpointOptionError('channel', {}, "this agent's PinChannel"),
    );
    expect(() => new PinClient({ ...options, reader: 'dst' as never })).toThrow(
      new EndpointOptionError('reader', 'dst', 'this rank as its sources name it: { workerId, incarnation, rank }'),
    );
    expect(() => new PinClient({ ...options, onHeldChange: 1 as never })).toThrow(
      new EndpointOptionError('onHeldChange', 1, 'a function'),
    );
    expect(new PinClient(options).heldPins).toBe(0);
  });

  it('refuses as not-source a revocation or confirmation of a pin sent by another member of the cluster', async () => {
    const { client, readerAgent, readerChannel, secret, pin, toReader } = await pair();
    const held = await pin([10n]);
    const member = await transport.createAgent({ name: `pin-client-member-${process.pid}`, backend: 'loopback' });
    agents.push(member);
    const memberChannel = new PinChannel({ agent: member, secret });
    const toReaderFromMember = member.loadPeer(readerAgent.metadata());
    memberChannel.send(toReaderFromMember, { kind: 'revoke', pinId: held.pinId, reason: 'shutting-down' });
    await toReader();
    memberChannel.send(toReaderFromMember, { kind: 'renewed', pinId: held.pinId, leaseMs: 900 });
    await toReader();
    expect(client.heldPins).toBe(1);
    expect(readerChannel.refusedMessages).toEqual({ ...noRefusals, 'not-source': 2 });
  });

  it('settles lost when no renewal is confirmed within the lease', async () => {
    const { clock, pin, toSource } = await pair();
    const held = await pin([10n]);
    clock.advance(300);
    await toSource();
    clock.advance(600);
    expect(await held.lost).toMatchObject({ reason: 'lease-lapsed' });
  });

  it('keeps a pin whose renewal was confirmed in time while the JavaScript thread was held, its notification not yet read', async () => {
    const { client, clock, readerAgent, pool, pin, toSource } = await pair();
    await pin([10n]);
    const router = new NotificationRouter();
    router.addHandler((notification) => client.receive(notification));
    router.start(readerAgent);
    clock.advance(300);
    await nextTurn();
    await toSource();
    // Held here, synchronously, until the confirmation waits in the reader's agent: nothing reads it before the next renewal is due.
    holdUntilNotificationWaits(readerAgent);
    expect(readerAgent.counters().pendingNotifications).toBe(1);
    clock.advance(600);
    await nextTurn();
    expect(client.heldPins).toBe(1);
    // The renewal sent at 900 ms reaches the source while its lease runs.
    await toSource();
    expect(pool.pinsOn(0)).toBe(1);
  });

  it('counts a lease from when the renewal the source confirmed was sent, not from when its confirmation was read', async () => {
    const { client, server, clock, pin, toSource, toReader } = await pair();
    const held = await pin([10n]);
    clock.advance(300);
    await nextTurn();
    // The source takes the renewal at 300 ms: its lease runs to 1,200 ms.
    await toSource();
    clock.advance(250);
    await toReader();
    clock.advance(650);
    await nextTurn();
    expect(server.heldPins).toBe(0);
    expect(client.heldPins).toBe(0);
    expect(await held.lost).toMatchObject({ reason: 'lease-lapsed' });
  });

  it('counts the first lease from when the pin was asked for', async () => {
    const { client, clock, sourcePeer, toSource, toReader } = await pair();
    const pinning = askForBlock10(client, sourcePeer);
    clock.advance(400);
    await toSource();
    await toReader();
    const held = await pinning;
    clock.advance(300);
    await nextTurn();
    clock.advance(300);
    await nextTurn();
    expect(client.heldPins).toBe(0);
    expect(await held.lost).toMatchObject({ reason: 'lease-lapsed' });
  });

  it('settles lost when the heartbeat reports the source unresponsive', async () => {
    const { pin, readerAgent, sourceAgent, client } = await pairOnHeldHeartbeat();
    const held = await pin([10n]);
    client.peerEvent(await stallSource(readerAgent, sourceAgent));
    expect(await held.lost).toMatchObject({
      reason: 'source-unresponsive',
      detail: expect.stringContaining(`its agent ${sourceAgent.name} answered no heartbeat for`),
    });
    expect(client.heldPins).toBe(0);
    sourceAgent.faults.stallProgress(false);
  });

  it('watches the source only while a request awaits its answer or a pin is held there', async () => {
    const { sourcePeer, pin, toSource, toReader } = await pair();
    const watch = vi.spyOn(sourcePeer, 'watch');
    const unwatch = vi.spyOn(sourcePeer, 'unwatch');
    await expect(pin([99n])).rejects.toThrow(PinRefusedError);
    expect([watch.mock.calls.length, unwatch.mock.calls.length]).toEqual([1, 1]);
    const held = await pin([10n]);
    expect([watch.mock.calls.length, unwatch.mock.calls.length]).toEqual([2, 1]);
    const releasing = held.release();
    await toSource();
    await toReader();
    await releasing;
    expect(unwatch.mock.invocationCallOrder.at(-1)).toBeGreaterThan(watch.mock.invocationCallOrder.at(-1) as number);
  });

  it('ends a pin request at once when the heartbeat reports its source unresponsive before it answers, and fails later pins at once until it answers again', async () => {
    const { client, clock, readerAgent, sourceAgent, sourcePeer, pool, toSource, toReader, pin } =
      await pairOnHeldHeartbeat();
    // The pending request has the source watched, so probed.
    const pinning = askForBlock10(client, sourcePeer);
    client.peerEvent(await stallSource(readerAgent, sourceAgent));
    const error = await pinning.catch((rejection: unknown) => rejection);
    expect(error).toBeInstanceOf(SourceUnresponsiveError);
    expect(error).toMatchObject({
      code: 'SOURCE_UNRESPONSIVE',
      reason: 'source-unresponsive',
      operation: 'pin',
      sourceRank: sourceIdentity.rank,
      peerName: sourceAgent.name,
    });
    expect((error as Error).message).toContain(
      `source rank tp 1 pp 0 stopped answering before it answered the pin: its agent ${sourceAgent.name} answered no heartbeat for`,
    );
    // Not by the answer timeout: the client's clock never moved.
    expect(clock.now()).toBe(0);
    const sent = readerAgent.counters().notificationsSent;
    await expect(
      client.pin({
        peer: sourcePeer,
        source: sourceIdentity,
        start: 0,
        hashes: BigUint64Array.of(10n),
        wantsChecksums: false,
      }),
    ).rejects.toMatchObject({ code: 'SOURCE_UNRESPONSIVE' });
    expect(readerAgent.counters().notificationsSent).toBe(sent);

    // Resumed, the source answers the probe it was sent while stalled.
    sourceAgent.faults.stallProgress(false);
    const recovered = await readerAgent.nextPeerEvent();
    expect(recovered).toMatchObject({ type: 'peer-responsive', cause: 'answered' });
    client.peerEvent(recovered);
    // The abandoned request's late grant is given straight back.
    await toSource();
    expect(pool.pinsOn(0)).toBe(1);
    await toReader();
    await toSource();
    expect(pool.pinsOn(0)).toBe(0);
    await toReader();
    expect(await pin([10n])).toMatchObject({ positions: { start: 0, count: 1 } });
  });

  it('ends a pin request at once when its source closes before it answers, and asks again once the source is reloaded', async () => {
    const { client, clock, readerAgent, sourceAgent, sourcePeer } = await pairOnHeldHeartbeat();
    const pinning = askForBlock10(client, sourcePeer);
    await sourceAgent.close();
    // The first round's probe finds the source gone and fails the connection; the second reports it.
    readerAgent.faults.runHeartbeatRounds(2);
    const [event, ...others] = readerAgent.pollPeerEvents();
    expect(others).toEqual([]);
    expect(event).toMatchObject({ type: 'peer-unresponsive', cause: 'disconnected', peerName: sourceAgent.name });
    client.peerEvent(event as PeerEvent);
    await expect(pinning).rejects.toMatchObject({
      code: 'SOURCE_UNRESPONSIVE',
      reason: 'source-unresponsive',
      operation: 'pin',
      peerName: sourceAgent.name,
      peerEventCause: 'disconnected',
      message: `source rank tp 1 pp 0 stopped answering before it answered the pin: its agent ${sourceAgent.name} lost its connection: its process died or its endpoint was closed`,
    });
    expect(clock.now()).toBe(0);
    expect(client.heldPins).toBe(0);
    await expect(askForBlock10(client, sourcePeer)).rejects.toMatchObject({ peerEventCause: 'disconnected' });

    // The source starts again under its name: loaded anew, it is judged afresh, so a pin is asked of it again.
    const restarted = await transport.createAgent({ name: sourceAgent.name, backend: 'loopback' });
    agents.push(restarted);
    expect(readerAgent.loadPeer(restarted.metadata())).toBe(sourcePeer);
    const reloaded = await readerAgent.nextPeerEvent();
    expect(reloaded).toMatchObject({ type: 'peer-responsive', cause: 'reloaded', peer: sourcePeer });
    client.peerEvent(reloaded);
    const sent = readerAgent.counters().notificationsSent;
    const asked = askForBlock10(client, sourcePeer);
    expect(readerAgent.counters().notificationsSent).toBe(sent + 1);
    clock.advance(500);
    await expect(asked).rejects.toBeInstanceOf(PinTimeoutError);
  });

  it('pins and releases all the same when its onHeldChange listener throws', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const { client, pool, pin, toSource, toReader } = await pair(undefined, {
        onHeldChange: () => {
          throw new Error('gauge broke');
        },
      });
      const held = await pin([10n]);
      expect([client.heldPins, pool.pinsOn(0)]).toEqual([1, 1]);
      const releasing = held.release();
      await toSource();
      await toReader();
      await releasing;
      expect([client.heldPins, pool.pinsOn(0)]).toEqual([0, 0]);
      expect(warn.mock.calls.map(([message]) => message)).toEqual([
        'endpoint: a pins-held listener threw: gauge broke',
        'endpoint: a pins-held listener threw: gauge broke',
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  it('ends a release at once when the heartbeat reports its source unresponsive before it acknowledges', async () => {
    const { client, clock, readerAgent, sourceAgent, pin } = await pairOnHeldHeartbeat();
    const held = await pin([10n]);
    const releasing = held.release();
    client.peerEvent(await stallSource(readerAgent, sourceAgent));
    await expect(releasing).rejects.toMatchObject({
      code: 'SOURCE_UNRESPONSIVE',
      operation: 'release',
      peerName: sourceAgent.name,
    });
    expect(clock.now()).toBe(0);
    expect(client.heldPins).toBe(0);
    sourceAgent.faults.stallProgress(false);
  });
});
