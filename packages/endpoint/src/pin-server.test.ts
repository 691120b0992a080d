import type { Agent } from '@kvreuse/native-bindings';
import { afterEach, describe, expect, it } from 'vitest';
import { loopbackPins } from '../test/support/loopback-pins.js';
import { EndpointOptionError } from './errors.js';
import { encodePinMessage, type PinMessage, type PinRequestMessage, parsePinMessage } from './pin-messages.js';
import { PinServer, type PinServerOptions } from './pin-server.js';

const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

const source = { workerId: 'src', incarnation: 'inc-1', epoch: 3, rank: { tpRank: 0, ppRank: 0 } };

async function setup(options: Partial<PinServerOptions> = {}) {
  const { sourceAgent, readerAgent, readerPeer, sourcePeer, pool, clock } = await loopbackPins('pin-server', agents);
  const server = new PinServer({
    agent: sourceAgent,
    adapter: pool,
    source,
    resolvePeer: (name) =>
      name === readerAgent.name ? Promise.resolve(readerPeer) : Promise.reject(new Error(`no peer ${name}`)),
    checksums: (_request, blocks) => blocks.map((block) => block + 1000),
    leaseMs: 1000,
    clock,
    ...options,
  });
  /** Sends `message` from the reader and has the server handle it; returns the server's answer. */
  const exchange = async (message: PinMessage): Promise<PinMessage> => {
    readerAgent.sendNotification(sourcePeer, encodePinMessage(message));
    expect(await server.receive(await sourceAgent.nextNotification())).toBe(true);
    return parsePinMessage((await readerAgent.nextNotification()).data);
  };
  return { server, pool, clock, exchange, readerAgent, sourceAgent, sourcePeer };
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

function readerWait(timeoutMs: number, controller: AbortController) {
  return { deadlineAt: timeoutMs, timeoutMs, signal: controller.signal };
}

describe('PinServer', () => {
  it('grants the longest prefix it holds, with checksums, and pins those blocks until released', async () => {
    const { exchange, pool } = await setup();
    const grant = await exchange(request('p1', [10n, 11n, 99n, 12n]));
    expect(grant).toEqual({
      kind: 'grant',
      pinId: 'p1',
      sourceBlocks: Uint32Array.of(0, 1),
      checksums: Uint32Array.of(1000, 1001),
      leaseMs: 1000,
    });
    expect(pool.pinsOn(0)).toBe(1);
    expect(await exchange({ kind: 'release', pinId: 'p1' })).toEqual({ kind: 'released', pinId: 'p1' });
    expect(pool.pinsOn(0)).toBe(0);
    expect(await exchange({ kind: 'release', pinId: 'p1' })).toEqual({ kind: 'released', pinId: 'p1' });
  });

  it('grants without checksums when the reader wants none', async () => {
    const { exchange } = await setup();
    expect(await exchange(request('p1', [10n], { wantsChecksums: false }))).toEqual({
      kind: 'grant',
      pinId: 'p1',
      sourceBlocks: Uint32Array.of(0),
      leaseMs: 1000,
    });
  });

  it('refuses blocks it does not hold, a stale incarnation or epoch, and a pin id already held', async () => {
    const { exchange } = await setup();
    expect(await exchange(request('p1', [99n]))).toEqual({ kind: 'refuse', pinId: 'p1', reason: 'evicted' });
    expect(await exchange(request('p2', [10n], { source: { incarnation: 'inc-0', epoch: 3 } }))).toMatchObject({
      reason: 'stale-incarnation',
    });
    expect(await exchange(request('p3', [10n], { source: { incarnation: 'inc-1', epoch: 2 } }))).toMatchObject({
      reason: 'stale-epoch',
    });
    await exchange(request('p4', [10n]));
    expect(await exchange(request('p4', [10n]))).toMatchObject({ kind: 'refuse', reason: 'unknown-pin' });
  });

  it('lets a lease lapse without renewal and keeps a renewed one', async () => {
    const { exchange, pool, clock } = await setup();
    await exchange(request('kept', [10n]));
    await exchange(request('lapses', [11n]));
    clock.advance(600);
    expect(await exchange({ kind: 'renew', pinId: 'kept' })).toEqual({ kind: 'renewed', pinId: 'kept', leaseMs: 1000 });
    clock.advance(600);
    expect(pool.pinsOn(0)).toBe(1);
    expect(pool.pinsOn(1)).toBe(0);
    expect(await exchange({ kind: 'renew', pinId: 'lapses' })).toEqual({
      kind: 'refuse',
      pinId: 'lapses',
      reason: 'unknown-pin',
    });
  });

  it('refuses new pins once asked, and waits for readers reporting each pin and how it ended', async () => {
    const { exchange, server, clock, pool } = await setup();
    await exchange(request('released', [10n]));
    await exchange(request('lapsed', [11n]));
    const controller = new AbortController();
    expect(server.refusing).toBe(false);
    const waiting = server.waitForReaders(readerWait(5000, controller));
    expect(server.refusing).toBe(true);
    expect(await exchange(request('late', [12n]))).toMatchObject({ kind: 'refuse', reason: 'shutting-down' });
    await exchange({ kind: 'release', pinId: 'released' });
    clock.advance(1000);
    const outcome = await waiting;
    expect(outcome).toMatchObject({ released: 1, lapsed: 1, outstanding: 0 });
    expect(outcome.pins.map((pin) => [pin.pinId, pin.ended])).toEqual([
      ['released', 'released'],
      ['lapsed', 'lapsed'],
    ]);
    expect(pool.pinsOn(0) + pool.pinsOn(1)).toBe(0);
  });

  it('revokes the pins still held at the deadline and tells their readers', async () => {
    const { exchange, server, pool, readerAgent } = await setup();
    await exchange(request('held', [10n, 11n]));
    const controller = new AbortController();
    const waiting = server.waitForReaders(readerWait(5000, controller));
    controller.abort();
    const outcome = await waiting;
    expect(outcome).toMatchObject({
      released: 0,
      lapsed: 0,
      outstanding: 1,
      pins: [{ pinId: 'held', blocks: 2, ended: 'revoked' }],
    });
    expect(parsePinMessage((await readerAgent.nextNotification()).data)).toEqual({
      kind: 'revoke',
      pinId: 'held',
      reason: 'shutting-down',
    });
    expect(pool.pinsOn(0)).toBe(0);
    expect(server.heldPins).toBe(0);
  });

  it('ignores and counts malformed messages, and leaves reader messages to the client', async () => {
    const { server, sourceAgent, readerAgent, sourcePeer } = await setup();
    readerAgent.sendNotification(sourcePeer, Uint8Array.of(1, 2, 3));
    expect(await server.receive(await sourceAgent.nextNotification())).toBe(false);
    readerAgent.sendNotification(sourcePeer, encodePinMessage({ kind: 'released', pinId: 'x' }));
    expect(await server.receive(await sourceAgent.nextNotification())).toBe(false);
    expect(server.malformedMessages).toBe(1);
  });

  it('counts an answer it cannot send and keeps serving', async () => {
    const { server, sourceAgent } = await setup();
    expect(await server.receive({ sender: 'nobody', data: Buffer.from(encodePinMessage(request('p', [10n]))) })).toBe(
      true,
    );
    expect(server.unansweredMessages).toBe(1);
    expect(sourceAgent.pollNotifications()).toEqual([]);
  });

  it('refuses a lease that is not a whole number of milliseconds', async () => {
    await expect(setup({ leaseMs: 0 })).rejects.toThrow(EndpointOptionError);
  });
});
