import { setTimeout as sleep } from 'node:timers/promises';
import { defineSettings } from '@kvreuse/config';
import { transportGroup } from './settings.js';
import { describe, expect, it } from 'vitest';
import { agentName, testedBackends, transport } from '../test/support/backends.js';
import { allZero, liveCounters } from '../test/support/pair.js';
import { HandleClosedError } from './errors.js';
import { heartbeatLimits } from './heartbeat.js';

describe.each(testedBackends)('heartbeat on %s', (backend) => {
  it('refuses a wrongly shaped or out-of-range heartbeat with a typed error before creating the agent', async () => {
    const create = (heartbeat: unknown) =>
      transport.createAgent({ name: agentName('heartbeat-bad'), backend, heartbeat } as Parameters<
        typeof transport.createAgent
      >[0]);
    await expect(create(null)).rejects.toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'heartbeat' }),
    );
    const field = (heartbeatIntervalMs: unknown, heartbeatMisses: unknown) =>
      create({ heartbeatIntervalMs, heartbeatMisses });
    for (const interval of [heartbeatLimits.minIntervalMs - 1, heartbeatLimits.maxIntervalMs + 1, 50.5, '50']) {
      await expect(field(interval, 3)).rejects.toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'heartbeat.heartbeatIntervalMs' }),
      );
    }
    for (const misses of [0, heartbeatLimits.maxMisses + 1, 2.5, undefined]) {
      await expect(field(50, misses)).rejects.toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'heartbeat.heartbeatMisses' }),
      );
    }
    expect(liveCounters().liveAgents).toBe(0);
  });

  it('takes the transport settings as they resolve', async () => {
    const agent = await transport.createAgent({
      name: agentName('heartbeat-settings'),
      backend,
      heartbeat: defineSettings([transportGroup]).defaults.transport,
    });
    await agent.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('reports a watched peer whose progress stalls as unresponsive, once, and as responsive once it answers again', async () => {
    const source = await transport.createAgent({ name: agentName('heartbeat-source'), backend });
    // Ten intervals of grace: a live source answers well within them, however loaded the machine.
    const heartbeat = { heartbeatIntervalMs: 50, heartbeatMisses: 10 };
    const reader = await transport.createAgent({ name: agentName('heartbeat-reader'), backend, heartbeat });
    const peer = reader.loadPeer(source.metadata());
    expect(peer.name).toBe(source.name);
    peer.watch();
    // A peer is judged once it has answered (one that never did may have no way to answer).
    while (reader.counters().heartbeatAnswers === 0) await sleep(10);
    source.faults.stallProgress(true);
    const unresponsive = await reader.nextPeerEvent();
    expect(unresponsive).toMatchObject({ type: 'peer-unresponsive', cause: 'silent', peer, peerName: source.name });
    expect(unresponsive.silentMs).toBeGreaterThanOrEqual(heartbeat.heartbeatIntervalMs * heartbeat.heartbeatMisses);
    expect(reader.counters()).toMatchObject({ unresponsivePeers: 1 });
    expect(peer.info().state).toBe('ready');

    source.faults.stallProgress(false);
    const responsive = await reader.nextPeerEvent();
    expect(responsive).toMatchObject({ type: 'peer-responsive', cause: 'answered', peer, peerName: source.name });
    expect(responsive.silentMs).toBeGreaterThanOrEqual(unresponsive.silentMs);
    peer.unwatch();
    expect(reader.pollPeerEvents()).toEqual([]);
    const counters = reader.counters();
    expect(counters.unresponsivePeers).toBe(0);
    expect(counters.heartbeatsSent).toBeGreaterThan(heartbeat.heartbeatMisses);

    const iteration = reader.peerEvents()[Symbol.asyncIterator]().next();
    const waiting = expect(reader.nextPeerEvent()).rejects.toBeInstanceOf(HandleClosedError);
    await reader.close();
    await expect(iteration).resolves.toEqual({ done: true, value: undefined });
    await waiting;
    expect(() => peer.watch()).toThrow(HandleClosedError);
    await source.close();
    expect(liveCounters()).toEqual(allZero);
  });
});

describe('heartbeat on loopback', () => {
  it('runs the heartbeat rounds a test asks for, and no other, reporting a stalled peer in the round that counts its miss', async () => {
    const source = await transport.createAgent({ name: agentName('heartbeat-rounds-source'), backend: 'loopback' });
    const heartbeat = { heartbeatIntervalMs: heartbeatLimits.minIntervalMs, heartbeatMisses: 1 };
    const reader = await transport.createAgent({ name: agentName('heartbeat-rounds'), backend: 'loopback', heartbeat });
    for (const rounds of [-1, 1.5, '1', 2 ** 32]) {
      expect(() => reader.faults.runHeartbeatRounds(rounds as number)).toThrow(
        expect.objectContaining({ code: 'INVALID_ARGUMENT', argument: 'rounds' }),
      );
    }
    reader.faults.runHeartbeatRounds(0);
    const peer = reader.loadPeer(source.metadata());
    peer.watch();
    reader.faults.runHeartbeatRounds(1);
    expect(reader.counters().heartbeatsSent).toBe(1);
    // The answer to the probe that round sent.
    while (reader.counters().heartbeatAnswers === 0) await sleep(1);
    source.faults.stallProgress(true);
    expect(() => source.faults.runHeartbeatRounds(1)).toThrow(
      expect.objectContaining({ code: 'NOT_ALLOWED', call: 'kvt_fault_heartbeat_rounds' }),
    );
    // The first round probes afresh; the second counts the one miss allowed.
    reader.faults.runHeartbeatRounds(1);
    expect(reader.pollPeerEvents()).toEqual([]);
    reader.faults.runHeartbeatRounds(1);
    expect(reader.pollPeerEvents()).toMatchObject([{ type: 'peer-unresponsive', cause: 'silent', peer }]);
    expect(reader.counters().heartbeatsSent).toBe(3);

    source.faults.stallProgress(false);
    expect(await reader.nextPeerEvent()).toMatchObject({ type: 'peer-responsive', cause: 'answered', peer });
    reader.faults.clear();
    // Back on its clock: it probes the watched peer again without being asked.
    while (reader.counters().heartbeatsSent === 3) await sleep(1);
    peer.unload();
    await reader.close();
    await source.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('reports a peer whose connection failed as disconnected, then its reload as reloaded, and judges it afresh', async () => {
    const name = agentName('heartbeat-reloaded-source');
    let source = await transport.createAgent({ name, backend: 'loopback' });
    const heartbeat = { heartbeatIntervalMs: 20, heartbeatMisses: heartbeatLimits.maxMisses };
    const reader = await transport.createAgent({
      name: agentName('heartbeat-reloaded'),
      backend: 'loopback',
      heartbeat,
    });
    const peer = reader.loadPeer(source.metadata());
    peer.watch();
    // Closed, the source's agent is no probe's target any more: the probe fails the connection.
    await source.close();
    expect(await reader.nextPeerEvent()).toMatchObject({ type: 'peer-unresponsive', cause: 'disconnected', peer });
    expect(reader.counters().unresponsivePeers).toBe(1);

    source = await transport.createAgent({ name, backend: 'loopback' });
    const generation = peer.generation;
    expect(reader.loadPeer(source.metadata())).toBe(peer);
    expect(peer.generation).toBeGreaterThan(generation);
    expect(await reader.nextPeerEvent()).toEqual({
      type: 'peer-responsive',
      cause: 'reloaded',
      peer,
      peerName: name,
      silentMs: 0,
    });
    expect(reader.counters().unresponsivePeers).toBe(0);

    await source.close();
    expect(await reader.nextPeerEvent()).toMatchObject({ type: 'peer-unresponsive', cause: 'disconnected', peer });
    peer.unload();
    await reader.close();
    expect(liveCounters()).toEqual(allZero);
  });
});
