import { describe, expect, it } from 'vitest';
import { agentName, testedBackends, transport } from '../test/support/backends.js';
import { allZero, liveCounters, openPair, readRequest } from '../test/support/pair.js';
import { piecewiseDescriptors } from '../test/support/content.js';
import { settledYet } from '../test/support/settled.js';
import { HandleClosedError, InvalidArgumentError } from './errors.js';

const BYTES = 1 << 16;

describe.each(testedBackends)('metadata and peers on %s', (backend) => {
  it('loads a peer from its metadata and reports its regions', async () => {
    const pair = await openPair(backend, BYTES, 1);
    expect(pair.sourcePeer.info()).toEqual({ generation: pair.sourcePeer.generation, state: 'ready', regionCount: 1 });
    // Loading the same metadata again is the same peer.
    expect(pair.reader.loadPeer(pair.source.metadata())).toBe(pair.sourcePeer);
    expect(pair.reader.peers()).toEqual([pair.sourcePeer]);
    await pair.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('lists the regions a peer advertises and names the path to it', async () => {
    const pair = await openPair(backend, BYTES, 4);
    expect(pair.sourcePeer.regions()).toEqual([
      { id: pair.sourceRegion.id, address: pair.sourceRegion.address, bytes: BYTES, kind: 'dram', device: 0 },
    ]);
    const path = pair.sourcePeer.transport();
    expect(path).not.toBe('');
    if (backend === 'ucx') expect(path).toMatch(/\/memory/);
    pair.sourcePeer.invalidate();
    expect(pair.sourcePeer.regions()).toEqual([]);
    expect(() => pair.sourcePeer.transport()).toThrow(
      expect.objectContaining({ code: 'NOT_FOUND', call: 'kvt_peer_transport' }),
    );
    await pair.close();
  });

  it('refuses truncated, corrupted and empty blobs without crashing', async () => {
    const source = await transport.createAgent({ name: agentName('blob-source'), backend });
    const reader = await transport.createAgent({ name: agentName('blob-reader'), backend });
    try {
      const blob = source.metadata();
      for (const cut of [0, 1, 8, blob.length >> 1, blob.length - 1]) {
        expect(() => reader.loadPeer(blob.subarray(0, cut))).toThrow(
          expect.objectContaining({ code: 'INVALID_PARAM', call: 'kvt_peer_load' }),
        );
      }
      const corrupted = Buffer.from(blob);
      corrupted[corrupted.length >> 1] = (corrupted[corrupted.length >> 1] ?? 0) ^ 0xff;
      expect(() => reader.loadPeer(corrupted)).toThrow(expect.objectContaining({ code: 'INVALID_PARAM' }));
      expect(() => reader.loadPeer('blob' as unknown as Uint8Array)).toThrow(InvalidArgumentError);
      expect(reader.counters().livePeers).toBe(0);
    } finally {
      await reader.close();
      await source.close();
    }
  });

  it('refuses posts against an invalidated peer with NOT_FOUND until its metadata is loaded again', async () => {
    const pair = await openPair(backend, BYTES, 2);
    const before = pair.sourcePeer.generation;
    pair.sourcePeer.invalidate();
    expect(pair.sourcePeer.info()).toMatchObject({ state: 'invalidated' });
    const request = readRequest(pair, piecewiseDescriptors(1, BYTES));
    expect(() => pair.reader.post(request)).toThrow(
      expect.objectContaining({ code: 'NOT_FOUND', call: 'kvt_xfer_post' }),
    );
    expect(pair.reader.loadPeer(pair.source.metadata())).toBe(pair.sourcePeer);
    expect(pair.sourcePeer.generation).toBeGreaterThan(before);
    const operation = pair.reader.post(request);
    await expect(operation.done).resolves.toEqual({ bytesDone: BYTES });
    operation.release();
    await pair.close();
  });

  it('unloads a peer, after which its handle is closed', async () => {
    const pair = await openPair(backend, BYTES, 3);
    expect(pair.reader.peers()).toEqual([pair.sourcePeer]);
    pair.sourcePeer.unload();
    expect(() => pair.sourcePeer.info()).toThrow(HandleClosedError);
    expect(pair.reader.counters().livePeers).toBe(0);
    expect(pair.reader.peers()).toEqual([]);
    await pair.close();
    expect(() => pair.readerPeer.info()).toThrow(HandleClosedError);
  });
});

describe.each(testedBackends)('loadPeerInBackground on %s', (backend) => {
  it("returns before the agent's thread loaded the peer, then resolves with the same handle loadPeer gives", async () => {
    const source = await transport.createAgent({ name: agentName('bg-source'), backend });
    const reader = await transport.createAgent({ name: agentName('bg-reader'), backend });
    const bank = await source.allocate(BYTES);
    const region = source.register(bank);
    const blob = source.metadata();
    reader.faults.stallProgress(true);
    const loading = reader.loadPeerInBackground(blob);
    blob.fill(0); // the library copied what it needs
    expect([await settledYet(loading), reader.peers()]).toEqual([false, []]);
    reader.faults.stallProgress(false);
    const peer = await loading;
    expect([peer.name, peer.info().state, reader.peers()]).toEqual([source.name, 'ready', [peer]]);
    expect(reader.loadPeer(source.metadata())).toBe(peer);
    await reader.close();
    await region.deregister();
    await bank.free();
    await source.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('refuses a bad blob at once and an older generation from the thread, typed and with nothing loaded', async () => {
    const source = await transport.createAgent({ name: agentName('bg-stale'), backend });
    const reader = await transport.createAgent({ name: agentName('bg-reader'), backend });
    const older = source.metadata();
    const bank = await source.allocate(BYTES);
    const region = source.register(bank);
    await expect(reader.loadPeerInBackground(older.subarray(0, older.length - 1))).rejects.toMatchObject({
      code: 'INVALID_PARAM',
      call: 'kvt_peer_load',
    });
    await expect(reader.loadPeerInBackground('blob' as never)).rejects.toThrow(InvalidArgumentError);
    expect(reader.peers()).toEqual([]);
    const peer = await reader.loadPeerInBackground(source.metadata());
    await expect(reader.loadPeerInBackground(older)).rejects.toMatchObject({
      code: 'MISMATCH',
      call: 'kvt_peer_load',
      message: expect.stringMatching(/older than the loaded/),
    });
    expect(reader.peers()).toEqual([peer]);
    await reader.close();
    await region.deregister();
    await bank.free();
    await source.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('rejects with HandleClosedError when the agent closed before the load was answered', async () => {
    const source = await transport.createAgent({ name: agentName('bg-close'), backend });
    const reader = await transport.createAgent({ name: agentName('bg-reader'), backend });
    reader.faults.stallProgress(true);
    const loading = reader.loadPeerInBackground(source.metadata());
    expect(await settledYet(loading)).toBe(false);
    await expect(reader.close()).resolves.toEqual({ forced: undefined });
    await expect(loading).rejects.toMatchObject({ code: 'HANDLE_CLOSED', handle: 'Agent', action: 'load a peer' });
    await source.close();
    expect(liveCounters()).toEqual(allZero);
  });
});
