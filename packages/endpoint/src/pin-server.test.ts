import type { Agent } from '@kvreuse/native-bindings';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { answered, loopbackPins, transport } from '../test/support/loopback-pins.js';
import { holdUntilNotificationWaits } from '../test/support/held-thread.js';
import { nextTurn } from '../test/support/next-turn.js';
import { EndpointOptionError } from './errors.js';
import { PinChannel, sealPinMessage } from './pin-auth.js';
import { encodePinMessage, type PinGrantMessage, type PinMessage, type PinRequestMessage } from './pin-messages.js';
import { PinServer, type PinServerOptions } from './pin-server.js';
import type { BlockPool } from './block-pool.js';
import { deferred } from './deferred.js';
import { NotificationRouter } from './notification-router.js';
import type { PinAdapter } from './pin-adapter.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

const source = { workerId: 'src', incarnation: 'inc-1', epoch: 3, rank: { tpRank: 0, ppRank: 0 } };
const noRefusals = { unauthenticated: 0, malformed: 0, 'not-reader': 0, 'not-source': 0, replayed: 0 };

/** A server on the block pool, its adapter's renewals or releases answered by `calls` where given. */
async function setup(
  options: Partial<PinServerOptions> = {},
  calls: AdapterCalls = {},
  given?: Awaited<ReturnType<typeof loopbackPins>>,
) {
  const pins = given ?? (await loopbackPins('pin-server', agents));
  const { sourceAgent, readerAgent, readerPeer, sourcePeer, secret, sourceChannel, readerChannel, pool, clock } = pins;
  const server = new PinServer({
    channel: sourceChannel,
    adapter: withAdapterCalls(pool, calls),
    source,
    resolvePeer: (name) =>
      name === readerAgent.name ? Promise.resolve(readerPeer) : Promise.reject(new Error(`no peer ${name}`)),
    checksums: (_request, blocks) => blocks.map((block) => block + 1000),
    leaseMs: 1000,
    clock,
    ...options,
  });
  /** Sends `message` from the reader and has the server handle it; returns the server's answer (fails at once when it left it unanswered). */
  const exchange = async (message: PinMessage): Promise<PinMessage | undefined> => {
    const unanswered = server.unansweredMessages;
    readerChannel.send(sourcePeer, message);
    expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
    expect(server.unansweredMessages).toBe(unanswered);
    return readerChannel.open(await readerAgent.nextNotification());
  };
  /** The grant id of a granted `request`. */
  const grant = async (message: PinRequestMessage): Promise<string> =>
    ((await exchange(message)) as PinGrantMessage).grantId;
  return {
    server,
    pool,
    clock,
    exchange,
    grant,
    readerAgent,
    sourceAgent,
    sourcePeer,
    secret,
    sourceChannel,
    readerChannel,
  };
}

type AdapterCalls = Partial<Pick<PinAdapter, 'renewPin' | 'releasePin' | 'cancelPin'>> & {
  /** Where given, the pool answers each request once what this returns for its hashes resolves. */
  readonly beforeGrant?: (hashes: readonly bigint[]) => Promise<void>;
};

function withAdapterCalls(pool: BlockPool, calls: AdapterCalls): PinAdapter {
  const { beforeGrant } = calls;
  return {
    requestPin:
      beforeGrant === undefined
        ? pool.requestPin.bind(pool)
        : async (pinId, hashes) => {
            await beforeGrant(hashes);
            return pool.requestPin(pinId, hashes);
          },
    renewPin: calls.renewPin ?? pool.renewPin.bind(pool),
    releasePin: calls.releasePin ?? pool.releasePin.bind(pool),
    cancelPin: calls.cancelPin ?? pool.cancelPin.bind(pool),
    onEvicted: pool.onEvicted.bind(pool),
  };
}

function request(pinId: string, hashes: bigint[], overrides: Partial<PinRequestMessage> = {}): PinRequestMessage {
  return {
    kind: 'request',
    pinId,
    reader: { workerId: 'dst', incarnation: 'r-1', rank: { tpRank: 0, ppRank: 0 } },
    source: { incarnation: source.incarnation, epoch: source.epoch },
    start: 0,
    hashes: BigUint64Array.from(hashes),
    wantsChecksums: true,
    ...overrides,
  };
}

/** Runs `body` with process warnings caught, and resolves with the messages of those it emitted. */
async function warningsOf(body: () => Promise<void>): Promise<unknown[]> {
  const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  try {
    await body();
    return warn.mock.calls.map(([message]) => message);
  } finally {
    warn.mockRestore();
  }
}

function readerWait(timeoutMs: number, controller: AbortController) {
  return { deadlineAt: timeoutMs, timeoutMs, signal: controller.signal };
}

/** A granted pin whose first renewal the server took and its adapter is still answering (`renewal` answers it). */
async function renewalBeingAnswered() {
  const renewal = deferred<boolean>();
  const pins = await setup({}, { renewPin: () => renewal.promise });
  const grantId = await pins.grant(request('p1', [10n]));
  pins.readerChannel.send(pins.sourcePeer, { kind: 'renew', pinId: grantId, sequence: 1 });
  expect(pins.server.receive(await pins.sourceAgent.nextNotification())).toBe(true);
  return { ...pins, grantId, renewal };
}

describe('PinServer', () => {
  it('grants the longest prefix it holds under a random grant id, with checksums, and pins those blocks until released', async () => {
    const { exchange, pool } = await setup();
    const grant = await exchange(request('p1', [10n, 11n, 99n, 12n]));
    expect(grant).toEqual({
      kind: 'grant',
      pinId: 'p1',
      grantId: expect.stringMatching(/^[0-9a-f]{32}$/),
      sourceBlocks: Uint32Array.of(0, 1),
      checksums: Uint32Array.of(1000, 1001),
      leaseMs: 1000,
    });
    const { grantId } = grant as PinGrantMessage;
    expect(((await exchange(request('p2', [10n]))) as PinGrantMessage).grantId).not.toBe(grantId);
    expect(pool.pinsOn(0)).toBe(2);
    const release = { kind: 'release', pinId: grantId, sequence: 1 } as const;
    expect(await exchange(release)).toEqual({ kind: 'released', pinId: grantId });
    expect(pool.pinsOn(0)).toBe(1);
    expect(await exchange({ ...release, sequence: 2 })).toEqual({ kind: 'released', pinId: grantId });
  });

  it('grants without checksums when the reader wants none', async () => {
    const { exchange } = await setup();
    expect(await exchange(request('p1', [10n], { wantsChecksums: false }))).toEqual({
      kind: 'grant',
      pinId: 'p1',
      grantId: expect.any(String),
      sourceBlocks: Uint32Array.of(0),
      leaseMs: 1000,
    });
  });

  it('refuses blocks it does not hold, and a stale incarnation or epoch', async () => {
    const { exchange } = await setup();
    expect(await exchange(request('p1', [99n]))).toEqual({ kind: 'refuse', pinId: 'p1', reason: 'evicted' });
    expect(await exchange(request('p2', [10n], { source: { incarnation: 'inc-0', epoch: 3 } }))).toMatchObject({
      reason: 'stale-incarnation',
    });
    expect(await exchange(request('p3', [10n], { source: { incarnation: 'inc-1', epoch: 2 } }))).toMatchObject({
      reason: 'stale-epoch',
    });
  });

  it('refuses, counts and leaves unanswered a request whose id its sender used within two leases', async () => {
    const { exchange, server, sourceAgent, sourcePeer, readerAgent, readerChannel, sourceChannel, clock } =
      await setup();
    await exchange(request('p1', [10n]));
    clock.advance(1999);
    await nextTurn();
    readerChannel.send(sourcePeer, request('p1', [10n]));
    expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
    expect(sourceChannel.refusedMessages).toEqual({ ...noRefusals, replayed: 1 });
    expect(readerAgent.pollNotifications()).toEqual([]);
    expect(server.heldPins).toBe(0);
    clock.advance(1);
    expect(await exchange(request('p1', [10n]))).toMatchObject({ kind: 'grant', pinId: 'p1' });
  });

  it('lets a lease lapse without renewal and keeps a renewed one', async () => {
    const { exchange, grant, pool, clock } = await setup();
    const kept = await grant(request('kept', [10n]));
    const lapses = await grant(request('lapses', [11n]));
    clock.advance(600);
    expect(await exchange({ kind: 'renew', pinId: kept, sequence: 1 })).toEqual({
      kind: 'renewed',
      pinId: kept,
      leaseMs: 1000,
    });
    clock.advance(600);
    await nextTurn();
    expect(pool.pinsOn(0)).toBe(1);
    expect(pool.pinsOn(1)).toBe(0);
    expect(await exchange({ kind: 'renew', pinId: lapses, sequence: 1 })).toEqual({
      kind: 'refuse',
      pinId: lapses,
      reason: 'unknown-pin',
    });
  });

  it('keeps a pin whose renewal arrived before the lease ended while the JavaScript thread was held, its notification not yet read', async () => {
    const { server, grant, pool, clock, sourceAgent, sourcePeer, readerAgent, readerChannel } = await setup();
    const grantId = await grant(request('p1', [10n]));
    const router = new NotificationRouter();
    router.addHandler((notification) => server.receive(notification));
    router.start(sourceAgent);
    clock.advance(600);
    readerChannel.send(sourcePeer, { kind: 'renew', pinId: grantId, sequence: 1 });
    // Held here, synchronously, until the renewal waits in the source's agent: nothing reads it before the lease ends.
    holdUntilNotificationWaits(sourceAgent);
    expect(sourceAgent.counters().pendingNotifications).toBe(1);
    clock.advance(400);
    expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
      kind: 'renewed',
      pinId: grantId,
      leaseMs: 1000,
    });
    await nextTurn();
    expect(pool.pinsOn(0)).toBe(1);
    expect(server.heldPins).toBe(1);
  });

  it('lets the end of a lease wait for a renewal the adapter is still answering', async () => {
    const { server, pool, clock, sourceAgent, sourcePeer, readerAgent, readerChannel, grantId, renewal } =
      await renewalBeingAnswered();
    clock.advance(1000);
    await nextTurn();
    expect(server.heldPins).toBe(1);
    renewal.resolve(true);
    await server.settled();
    expect(readerChannel.open(await readerAgent.nextNotification())).toMatchObject({ kind: 'renewed' });
    await nextTurn();
    expect(pool.pinsOn(0)).toBe(1);
    clock.advance(1000);
    await nextTurn();
    expect(pool.pinsOn(0)).toBe(0);
  });

  it('refuses, and does not confirm, a renewal the adapter answered after the pin was revoked', async () => {
    const { server, clock, readerAgent, readerChannel, grantId, renewal } = await renewalBeingAnswered();
    await server.engineGone();
    expect(readerChannel.open(await readerAgent.nextNotification())).toMatchObject({ kind: 'revoke', pinId: grantId });
    renewal.resolve(true);
    await server.settled();
    expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
      kind: 'refuse',
      pinId: grantId,
      reason: 'engine-gone',
    });
    expect(server.heldPins).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('answers a release after the renewal its adapter is still answering, in the order they arrived', async () => {
    const { server, pool, sourceAgent, sourcePeer, readerAgent, readerChannel, grantId, renewal } =
      await renewalBeingAnswered();
    readerChannel.send(sourcePeer, { kind: 'release', pinId: grantId, sequence: 2 });
    expect(server.receive(await sourceAgent.nextNotification())).toBe(true);
    await nextTurn();
    expect(pool.pinsOn(0)).toBe(1);
    renewal.resolve(true);
    await server.settled();
    const answers = [await readerAgent.nextNotification(), await readerAgent.nextNotification()];
    expect(answers.map((answer) => readerChannel.open(answer))).toEqual([
      { kind: 'renewed', pinId: grantId, leaseMs: 1000 },
      { kind: 'released', pinId: grantId },
    ]);
    expect(pool.pinsOn(0)).toBe(0);
    expect(server.heldPins).toBe(0);
  });

  it("tells its adapter of a pin's end once: a lease that ends while the adapter answers a release does not lapse the pin", async () => {
    const released = deferred<void>();
    const releases: string[] = [];
    const calls = {
      releasePin: (pinId: string) => {
        releases.push(pinId);
        return released.promise;
      },
    };
    const { server, grant, clock, sourceAgent, sourcePeer, readerAgent, readerChannel } = await setup({}, calls);
    const grantId = await grant(request('p1', [10n]));
    const waiting = server.waitForReaders(readerWait(5000, new AbortController()));
    readerChannel.send(sourcePeer, { kind: 'release', pinId: grantId, sequence: 1 });
    expect(server.receive(await sourceAgent.nextNotification())).toBe(true);
    clock.advance(1000);
    await nextTurn();
    released.resolve();
    await server.settled();
    expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({ kind: 'released', pinId: grantId });
    expect(releases).toEqual([grantId]);
    expect(await waiting).toMatchObject({ released: 1, lapsed: 0, outstanding: 0 });
  });

  it('answers the messages that follow a request its adapter is still answering: a slow adapter holds back no other', async () => {
    const granting = deferred<void>();
    const slowly = (hashes: readonly bigint[]) => (hashes[0] === 12n ? granting.promise : Promise.resolve());
    const { server, grant, sourceAgent, sourcePeer, readerAgent, readerChannel } = await setup(
      {},
      { beforeGrant: slowly },
    );
    const held = await grant(request('held', [10n]));
    const router = new NotificationRouter();
    router.addHandler((notification) => server.receive(notification));
    router.start(sourceAgent);
    readerChannel.send(sourcePeer, request('slow', [12n]));
    readerChannel.send(sourcePeer, { kind: 'renew', pinId: held, sequence: 1 });
    expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
      kind: 'renewed',
      pinId: held,
      leaseMs: 1000,
    });
    readerChannel.send(sourcePeer, request('quick', [11n]));
    expect(readerChannel.open(await readerAgent.nextNotification())).toMatchObject({ kind: 'grant', pinId: 'quick' });
    granting.resolve();
    expect(readerChannel.open(await readerAgent.nextNotification())).toMatchObject({
      kind: 'grant',
      pinId: 'slow',
      sourceBlocks: Uint32Array.of(2),
    });
    expect(server.heldPins).toBe(3);
  });

  it("answers a pin's renewals in the order they arrived, and asks its adapter nothing more once the first ended the pin", async () => {
    const evicted = deferred<boolean>();
    const renewals: string[] = [];
    const renewPin = (pinId: string) => {
      renewals.push(pinId);
      return evicted.promise;
    };
    const { server, grant, sourceAgent, sourcePeer, readerAgent, readerChannel } = await setup({}, { renewPin });
    const grantId = await grant(request('p1', [10n]));
    for (const sequence of [1, 2]) {
      readerChannel.send(sourcePeer, { kind: 'renew', pinId: grantId, sequence });
      expect(server.receive(await sourceAgent.nextNotification())).toBe(true);
    }
    evicted.resolve(false);
    await server.settled();
    const answers = [await readerAgent.nextNotification(), await readerAgent.nextNotification()];
    expect(answers.map((answer) => readerChannel.open(answer))).toEqual([
      { kind: 'refuse', pinId: grantId, reason: 'evicted' },
      { kind: 'refuse', pinId: grantId, reason: 'unknown-pin' },
    ]);
    expect(renewals).toEqual([grantId]);
    expect(server.heldPins).toBe(0);
  });

  it('refuses, and cancels, a grant its adapter made after new pins were refused; the wait for readers waits for it', async () => {
    const asked = deferred<void>();
    const granting = deferred<void>();
    const beforeGrant = () => {
      asked.resolve();
      return granting.promise;
    };
    const { server, pool, sourceAgent, sourcePeer, readerAgent, readerChannel } = await setup({}, { beforeGrant });
    readerChannel.send(sourcePeer, request('p1', [10n]));
    expect(server.receive(await sourceAgent.nextNotification())).toBe(true);
    await asked.promise;
    let waited = false;
    const waiting = server.waitForReaders(readerWait(5000, new AbortController())).finally(() => (waited = true));
    await nextTurn();
    expect(waited).toBe(false);
    granting.resolve();
    expect(await waiting).toMatchObject({ released: 0, lapsed: 0, outstanding: 0, pins: [] });
    expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
      kind: 'refuse',
      pinId: 'p1',
      reason: 'shutting-down',
    });
    expect(pool.pinsOn(0)).toBe(0);
    expect(server.heldPins).toBe(0);
  });

  it('refuses, counts and leaves unanswered a replayed renewal or release: its sequence number is not above the last', async () => {
    const pins = await setup();
    const { exchange, grant, server, sourceAgent, sourcePeer, pool, clock, sourceChannel, readerAgent } = pins;
    const grantId = await grant(request('p1', [10n]));
    await exchange({ kind: 'renew', pinId: grantId, sequence: 2 });
    for (const message of [
      { kind: 'renew', pinId: grantId, sequence: 2 },
      { kind: 'renew', pinId: grantId, sequence: 1 },
      { kind: 'release', pinId: grantId, sequence: 2 },
    ] as const) {
      pins.readerChannel.send(sourcePeer, message);
      expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
    }
    expect(sourceChannel.refusedMessages).toEqual({ ...noRefusals, replayed: 3 });
    expect(readerAgent.pollNotifications()).toEqual([]);
    expect(pool.pinsOn(0)).toBe(1);
    clock.advance(1000);
    await nextTurn();
    expect(pool.pinsOn(0)).toBe(0);
  });

  it('refuses, counts and leaves unanswered a renewal or release of a grant from an agent that is not its reader', async () => {
    const { grant, server, sourceAgent, pool, secret, sourceChannel } = await setup();
    const grantId = await grant(request('p1', [10n]));
    const other = await transport.createAgent({ name: `pin-server-other-${process.pid}`, backend: 'loopback' });
    agents.push(other);
    const otherChannel = new PinChannel({ agent: other, secret });
    const toSource = other.loadPeer(sourceAgent.metadata());
    for (const kind of ['renew', 'release'] as const) {
      otherChannel.send(toSource, { kind, pinId: grantId, sequence: 5 });
      expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
    }
    expect(sourceChannel.refusedMessages).toEqual({ ...noRefusals, 'not-reader': 2 });
    expect(other.pollNotifications()).toEqual([]);
    expect(pool.pinsOn(0)).toBe(1);
  });

  it('refuses and counts a message without the tag the cluster secret gives its sender and receiver', async () => {
    const { server, sourceAgent, sourcePeer, readerAgent, sourceChannel, pool } = await setup();
    const bytes = encodePinMessage(request('p1', [10n]));
    const forged = new Uint8Array(bytes.length + 16);
    forged.set(bytes);
    readerAgent.sendNotification(sourcePeer, forged);
    readerAgent.sendNotification(sourcePeer, bytes);
    for (let count = 0; count < 2; count++)
      expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
    expect(sourceChannel.refusedMessages).toEqual({ ...noRefusals, unauthenticated: 2 });
    expect(readerAgent.pollNotifications()).toEqual([]);
    expect(server.heldPins + pool.pinsOn(0)).toBe(0);
  });

  it("refuses, counts and goes on serving when its channel's onRefused listener throws: receive() does not throw", async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const pins = await loopbackPins('pin-server', agents);
      const channel = new PinChannel({
        agent: pins.sourceAgent,
        secret: pins.secret,
        onRefused: () => {
          throw new Error('counter broke');
        },
      });
      const { server, exchange, sourceAgent, sourcePeer, readerAgent } = await setup({ channel }, {}, pins);
      const forged = new Uint8Array(encodePinMessage(request('p1', [10n])).length + 16);
      forged.set(encodePinMessage(request('p1', [10n])));
      readerAgent.sendNotification(sourcePeer, forged);
      expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
      expect(await exchange(request('p2', [10n]))).toMatchObject({ kind: 'grant', pinId: 'p2' });
      // A replayed request is refused (counted, unanswered) and is no answer that failed.
      pins.readerChannel.send(sourcePeer, request('p2', [10n]));
      expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
      expect(channel.refusedMessages).toEqual({ ...noRefusals, unauthenticated: 1, replayed: 1 });
      expect([server.heldPins, server.unansweredMessages]).toEqual([1, 0]);
      expect(warn.mock.calls.map(([message]) => message)).toEqual([
        'endpoint: a pin refusal listener threw: counter broke',
        'endpoint: a pin refusal listener threw: counter broke',
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses new pins once asked, and waits for readers reporting each pin and how it ended', async () => {
    const { exchange, grant, server, clock, pool } = await setup();
    const released = await grant(request('released', [10n]));
    const lapsed = await grant(request('lapsed', [11n]));
    const controller = new AbortController();
    expect(server.refusing).toBe(false);
    const waiting = server.waitForReaders(readerWait(5000, controller));
    expect(server.refusing).toBe(true);
    expect(await exchange(request('late', [12n]))).toMatchObject({ kind: 'refuse', reason: 'shutting-down' });
    await exchange({ kind: 'release', pinId: released, sequence: 1 });
    clock.advance(1000);
    const outcome = await waiting;
    expect(outcome).toMatchObject({ released: 1, lapsed: 1, outstanding: 0 });
    expect(outcome.pins.map((pin) => [pin.pinId, pin.ended])).toEqual([
      [released, 'released'],
      [lapsed, 'lapsed'],
    ]);
    expect(pool.pinsOn(0) + pool.pinsOn(1)).toBe(0);
  });

  it('revokes the pins still held at the deadline and tells their readers', async () => {
    const { grant, server, pool, readerAgent, readerChannel } = await setup();
    const held = await grant(request('held', [10n, 11n]));
    const controller = new AbortController();
    const waiting = server.waitForReaders(readerWait(5000, controller));
    controller.abort();
    const outcome = await waiting;
    expect(outcome).toMatchObject({
      released: 0,
      lapsed: 0,
      outstanding: 1,
      pins: [{ pinId: held, blocks: 2, ended: 'revoked' }],
    });
    expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
      kind: 'revoke',
      pinId: held,
      reason: 'shutting-down',
    });
    expect(pool.pinsOn(0)).toBe(0);
    expect(server.heldPins).toBe(0);
  });

  it('ignores and counts notifications that are no pin messages, and leaves reader messages to the client', async () => {
    const { server, sourceAgent, readerAgent, sourcePeer, readerChannel } = await setup();
    readerAgent.sendNotification(sourcePeer, Uint8Array.of(1, 2, 3));
    expect(await answered(server, await sourceAgent.nextNotification())).toBe(false);
    readerChannel.send(sourcePeer, { kind: 'released', pinId: 'x' });
    expect(await answered(server, await sourceAgent.nextNotification())).toBe(false);
    expect(server.malformedMessages).toBe(1);
  });

  it('counts an answer it cannot send and keeps serving', async () => {
    const { server, sourceAgent, secret } = await setup();
    const sealed = sealPinMessage(secret, 'nobody', sourceAgent.name, request('p', [10n]));
    expect(await answered(server, { sender: 'nobody', data: Buffer.from(sealed) })).toBe(true);
    expect(server.unansweredMessages).toBe(1);
    expect(sourceAgent.pollNotifications()).toEqual([]);
  });

  it('holds nothing for a request whose checksums it cannot compute: the grant is cancelled and the reader peer given back', async () => {
    const givenBack: unknown[] = [];
    const { server, pool, sourceAgent, sourcePeer, readerChannel } = await setup({
      checksums: () => {
        throw new Error('no route to this reader');
      },
      givePeerBack: (peer) => givenBack.push(peer),
    });
    readerChannel.send(sourcePeer, request('p1', [10n]));
    expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
    expect([server.heldPins, pool.pinsOn(0), givenBack.length, server.unansweredMessages]).toEqual([0, 0, 1, 1]);
  });

  it('holds nothing for a request whose grant cannot be sent: the grant is cancelled and the reader peer given back', async () => {
    const givenBack: unknown[] = [];
    const pins = await loopbackPins('pin-server-unsent', agents);
    const server = new PinServer({
      channel: pins.sourceChannel,
      adapter: withAdapterCalls(pins.pool, {
        // The reader's peer goes away while the adapter answers: the grant can no longer be sent to it.
        beforeGrant: () => Promise.resolve(pins.readerPeer.unload()),
      }),
      source,
      resolvePeer: () => Promise.resolve(pins.readerPeer),
      checksums: (_request, blocks) => blocks.map((block) => block + 1000),
      leaseMs: 1000,
      clock: pins.clock,
      givePeerBack: (peer) => givenBack.push(peer),
    });
    pins.readerChannel.send(pins.sourcePeer, request('p1', [10n]));
    expect(await answered(server, await pins.sourceAgent.nextNotification())).toBe(true);
    expect([server.heldPins, pins.pool.pinsOn(0), givenBack.length, server.unansweredMessages]).toEqual([0, 0, 1, 1]);
  });

  it('grants, lapses and gives back the reader peer of a pin all the same when its onHeldChange listener throws', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const givenBack: unknown[] = [];
      const { server, pool, clock, sourceAgent, sourcePeer, readerChannel } = await setup({
        onHeldChange: () => {
          throw new Error('gauge broke');
        },
        givePeerBack: (peer) => givenBack.push(peer),
      });
      const sent = sourceAgent.counters().notificationsSent;
      readerChannel.send(sourcePeer, request('p1', [10n]));
      expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
      expect(sourceAgent.counters().notificationsSent).toBe(sent + 1);
      expect([server.heldPins, pool.pinsOn(0), server.unansweredMessages]).toEqual([1, 1, 0]);
      clock.advance(1000);
      await nextTurn();
      expect([server.heldPins, pool.pinsOn(0), givenBack.length]).toEqual([0, 0, 1]);
      expect(warn.mock.calls.map(([message]) => message)).toEqual([
        'endpoint: a pins-held listener threw: gauge broke',
        'endpoint: a pins-held listener threw: gauge broke',
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  it("refuses a request as evicted, and warns, when its adapter's requestPin throws; the next request is granted", async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const { server, exchange, pool, readerChannel, readerAgent, sourceAgent, sourcePeer } = await setup(
        {},
        {
          beforeGrant: (hashes) =>
            hashes[0] === 10n ? Promise.reject(new Error('engine IPC down')) : Promise.resolve(),
        },
      );
      readerChannel.send(sourcePeer, request('p1', [10n]));
      expect(await answered(server, await sourceAgent.nextNotification())).toBe(true);
      // Answered, not left to the reader's timeout.
      expect(server.unansweredMessages).toBe(0);
      expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
        kind: 'refuse',
        pinId: 'p1',
        reason: 'evicted',
      });
      expect(warn.mock.calls.map(([message]) => message)).toEqual([
        "endpoint: a pin adapter's requestPin threw: engine IPC down",
      ]);
      expect([server.heldPins, pool.pinsOn(0)]).toEqual([0, 0]);
      expect(await exchange(request('p2', [11n]))).toMatchObject({ kind: 'grant', pinId: 'p2' });
    } finally {
      warn.mockRestore();
    }
  });

  it("refuses a renewal as evicted, cancels the pin and warns when its adapter's renewPin throws; the next request is granted", async () => {
    const thrown = await warningsOf(async () => {
      const renewPin = (): boolean => {
        throw new Error('engine IPC down');
      };
      const { server, grant, exchange, pool } = await setup({}, { renewPin });
      const grantId = await grant(request('p1', [10n]));
      expect(await exchange({ kind: 'renew', pinId: grantId, sequence: 1 })).toEqual({
        kind: 'refuse',
        pinId: grantId,
        reason: 'evicted',
      });
      expect([server.heldPins, pool.pinsOn(0)]).toEqual([0, 0]);
      expect(await exchange(request('p2', [10n]))).toMatchObject({ kind: 'grant', pinId: 'p2' });
    });
    expect(thrown).toEqual(["endpoint: a pin adapter's renewPin threw: engine IPC down"]);
  });

  it("cancels a pin, once, when its adapter's renewPin answers false: the adapter hears of each granted pin's end exactly once", async () => {
    const ends: string[] = [];
    const record = (end: string) => (pinId: string) => void ends.push(`${end} ${pinId}`);
    const calls = { renewPin: () => false, releasePin: record('releasePin'), cancelPin: record('cancelPin') };
    const { server, grant, exchange, clock } = await setup({}, calls);
    const grantId = await grant(request('p1', [10n]));
    const renewal = await exchange({ kind: 'renew', pinId: grantId, sequence: 1 });
    expect(renewal).toEqual({ kind: 'refuse', pinId: grantId, reason: 'evicted' });
    // Its reader's release and the end of its lease come after: the pin ended already.
    const release = await exchange({ kind: 'release', pinId: grantId, sequence: 2 });
    expect(release).toEqual({ kind: 'released', pinId: grantId });
    clock.advance(5000);
    await server.settled();
    expect(ends).toEqual([`cancelPin ${grantId}`]);
    expect(server.heldPins).toBe(0);
  });

  it("answers a release as released, and warns, when its adapter's releasePin rejects, as it does at a lapse; the next request is granted", async () => {
    const releases: string[] = [];
    const thrown = await warningsOf(async () => {
      const lapseReleased = deferred<void>();
      const releasePin = (pinId: string): Promise<void> => {
        releases.push(pinId);
        if (releases.length === 2) lapseReleased.resolve();
        return Promise.reject(new Error('engine IPC down'));
      };
      const { server, grant, exchange, clock } = await setup({}, { releasePin });
      const released = await grant(request('released', [10n]));
      expect(await exchange({ kind: 'release', pinId: released, sequence: 1 })).toEqual({
        kind: 'released',
        pinId: released,
      });
      await grant(request('lapsed', [11n]));
      clock.advance(1000);
      await lapseReleased.promise;
      await nextTurn();
      expect(server.heldPins).toBe(0);
      expect(await exchange(request('p3', [12n]))).toMatchObject({ kind: 'grant', pinId: 'p3' });
    });
    expect(releases).toHaveLength(2);
    expect(thrown).toEqual([
      "endpoint: a pin adapter's releasePin threw: engine IPC down",
      "endpoint: a pin adapter's releasePin threw: engine IPC down",
    ]);
  });

  it("revokes and refuses all the same, and warns, when its adapter's cancelPin throws", async () => {
    const thrown = await warningsOf(async () => {
      const asked = deferred<void>();
      const granting = deferred<void>();
      const cancelPin = (): void => {
        throw new Error('engine IPC down');
      };
      const beforeGrant = (hashes: readonly bigint[]): Promise<void> => {
        if (hashes[0] !== 12n) return Promise.resolve();
        asked.resolve();
        return granting.promise;
      };
      const { server, grant, readerChannel, readerAgent, sourceAgent, sourcePeer } = await setup(
        {},
        { cancelPin, beforeGrant },
      );
      const held = await grant(request('held', [10n]));
      // A request its adapter answers only once new pins are refused: granted, then cancelled and refused.
      readerChannel.send(sourcePeer, request('late', [12n]));
      expect(server.receive(await sourceAgent.nextNotification())).toBe(true);
      await asked.promise;
      server.refuseNewPins();
      granting.resolve();
      await server.settled();
      expect(server.unansweredMessages).toBe(0);
      expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
        kind: 'refuse',
        pinId: 'late',
        reason: 'shutting-down',
      });
      // A pin still held at the deadline: revoked.
      const controller = new AbortController();
      controller.abort();
      expect(await server.waitForReaders(readerWait(5000, controller))).toMatchObject({
        outstanding: 1,
        pins: [{ pinId: held, ended: 'revoked' }],
      });
      expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
        kind: 'revoke',
        pinId: held,
        reason: 'shutting-down',
      });
      expect(server.heldPins).toBe(0);
    });
    expect(thrown).toEqual([
      "endpoint: a pin adapter's cancelPin threw: engine IPC down",
      "endpoint: a pin adapter's cancelPin threw: engine IPC down",
    ]);
  });

  it('when its engine is gone, revokes held pins and refuses new pins and their renewals as engine-gone', async () => {
    const { server, grant, exchange, readerAgent, readerChannel, pool } = await setup();
    const grantId = await grant(request('p1', [10n, 11n]));
    expect(server.heldPins).toBe(1);
    await server.engineGone();
    expect(readerChannel.open(await readerAgent.nextNotification())).toEqual({
      kind: 'revoke',
      pinId: grantId,
      reason: 'engine-gone',
    });
    expect(server.heldPins).toBe(0);
    expect([pool.pinsOn(0), pool.pinsOn(1)]).toEqual([0, 0]);
    expect(await exchange({ kind: 'renew', pinId: grantId, sequence: 1 })).toEqual({
      kind: 'refuse',
      pinId: grantId,
      reason: 'engine-gone',
    });
    expect(await exchange(request('p2', [10n]))).toEqual({ kind: 'refuse', pinId: 'p2', reason: 'engine-gone' });
    server.refuseNewPins(); // a drain after it keeps the engine's reason
    expect(await exchange(request('p3', [10n]))).toEqual({ kind: 'refuse', pinId: 'p3', reason: 'engine-gone' });
  });

  it('refuses a lease that is not a whole number of milliseconds', async () => {
    await expect(setup({ leaseMs: 0 })).rejects.toThrow(EndpointOptionError);
  });

  it('refuses options of another shape with EndpointOptionError naming the option', async () => {
    const { server, pool, sourceChannel } = await setup();
    expect(server.heldPins).toBe(0);
    const options: PinServerOptions = {
      channel: sourceChannel,
      adapter: pool,
      source,
      resolvePeer: () => Promise.reject(new Error('no peer')),
      checksums: (_request, blocks) => blocks,
      leaseMs: 1000,
    };
    expect(() => new PinServer(undefined as never)).toThrow(EndpointOptionError);
    expect(() => new PinServer(null as never)).toThrow('endpoint option options = null is refused');
    expect(() => new PinServer({ ...options, channel: {} as never })).toThrow(
      new EndpointOptionError('channel', {}, "this agent's PinChannel"),
    );
    const requestOnly = { requestPin: () => ({ blocks: new Uint32Array() }) };
    expect(() => new PinServer({ ...options, adapter: requestOnly as never })).toThrow(
      new EndpointOptionError(
        'adapter',
        requestOnly,
        'a PinAdapter (requestPin, renewPin, releasePin, cancelPin, onEvicted)',
      ),
    );
    expect(() => new PinServer({ ...options, source: 'src' as never })).toThrow(
      new EndpointOptionError(
        'source',
        'src',
        'this rank as its readers name it: { workerId, incarnation, epoch, rank }',
      ),
    );
    expect(() => new PinServer({ ...options, resolvePeer: undefined as never })).toThrow(
      new EndpointOptionError('resolvePeer', undefined, 'a function'),
    );
    expect(() => new PinServer({ ...options, checksums: [] as never })).toThrow(
      new EndpointOptionError('checksums', [], 'a function'),
    );
    expect(() => new PinServer({ ...options, givePeerBack: 1 as never })).toThrow(
      new EndpointOptionError('givePeerBack', 1, 'a function'),
    );
    expect(() => new PinServer({ ...options, onHeldChange: null as never })).toThrow(
      new EndpointOptionError('onHeldChange', null, 'a function'),
    );
    expect(new PinServer(options).heldPins).toBe(0);
  });
});
