import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Agent, type Allocation, loadTransport, type Region } from '@kvreuse/native-bindings';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ClusterSecret, openSealedMetadata } from '@kvreuse/discovery';
import { loadRankPeer, transportMetadataOf } from './transport-metadata.js';

const transport = loadTransport();
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-transport-metadata-'));

function secret(name: string, fill: string): ClusterSecret {
  writeFileSync(join(dir, name), fill.repeat(32), { mode: 0o600 });
  return ClusterSecret.read(join(dir, name));
}

const ours = secret('ours', 'o');
const theirs = secret('theirs', 't');
let source: Agent;
let reader: Agent;
let allocation: Allocation;
let region: Region;

beforeAll(async () => {
  source = await transport.createAgent({ name: `signed-source-${process.pid}`, backend: 'loopback' });
  reader = await transport.createAgent({ name: `signed-reader-${process.pid}`, backend: 'loopback' });
  allocation = await source.allocate(4096);
  region = source.register(allocation);
});

afterAll(async () => {
  await reader.close();
  await region.deregister();
  await allocation.free();
  await source.close();
  rmSync(dir, { recursive: true, force: true });
});

const rank = { workerId: 'worker-a', incarnation: 'inc-1', ppRank: 0, tpRank: 1 };

/** The slot and `transport` field of a rank part of `rank` as a reader finds it in discovery. */
function published(metadata: Uint8Array, where = rank) {
  return {
    workerId: where.workerId,
    incarnation: where.incarnation,
    parallel: { tpRank: where.tpRank, ppRank: where.ppRank },
    transport: { agentName: source.name, generation: 2, metadata: Buffer.from(metadata).toString('base64') },
  };
}

describe('transport metadata of a rank part', () => {
  it('carries the agent blob sealed under the cluster secret (unreadable without it), and its generation', () => {
    const sealed = transportMetadataOf(source, ours, rank);
    expect(sealed).toMatchObject({ agentName: source.name, generation: 2 });
    expect(Buffer.from(sealed.metadata.subarray(0, 4)).toString()).toBe('KVTS');
    const blob = Buffer.from(source.metadata());
    expect(Buffer.from(sealed.metadata.subarray(sealed.metadata.length - blob.length))).not.toEqual(blob);
    const slot = { ...rank, agentName: source.name };
    expect(Buffer.from(openSealedMetadata(ours, slot, sealed.metadata))).toEqual(blob);
  });

  it('loads as a peer under the same secret', async () => {
    const peer = await loadRankPeer(reader, published(transportMetadataOf(source, ours, rank).metadata), ours);
    expect(peer.name).toBe(source.name);
    expect(peer.info().regionCount).toBe(1);
    peer.unload();
  });

  it('loads a part unchanged since its last load once: until its peer is invalidated or unloaded, or the part changes', async () => {
    const load = vi.spyOn(reader, 'loadPeerInBackground');
    const part = published(transportMetadataOf(source, ours, rank).metadata);
    const peer = await loadRankPeer(reader, part, ours);
    expect(await loadRankPeer(reader, part, ours)).toBe(peer);
    expect(await loadRankPeer(reader, { ...part }, ours)).toBe(peer);
    expect(load).toHaveBeenCalledTimes(1);
    // Another secret object (the same key): opened and loaded again.
    expect(await loadRankPeer(reader, part, ClusterSecret.read(join(dir, 'ours')))).toBe(peer);
    expect(load).toHaveBeenCalledTimes(2);

    peer.invalidate();
    expect(await loadRankPeer(reader, part, ours)).toBe(peer);
    expect(load).toHaveBeenCalledTimes(3);
    expect(peer.info().state).toBe('ready');

    const extra = await source.allocate(4096);
    const added = source.register(extra);
    const changed = published(transportMetadataOf(source, ours, rank).metadata);
    expect(await loadRankPeer(reader, changed, ours)).toBe(peer);
    expect(load).toHaveBeenCalledTimes(4);
    expect(peer.info().regionCount).toBe(2);
    expect(await loadRankPeer(reader, changed, ours)).toBe(peer);
    expect(load).toHaveBeenCalledTimes(4);

    peer.unload();
    const again = await loadRankPeer(reader, changed, ours);
    expect(again).not.toBe(peer);
    expect(again.isOpen).toBe(true);
    expect(load).toHaveBeenCalledTimes(5);
    again.unload();
    load.mockRestore();
    await added.deregister();
    await extra.free();
  });

  it('unsigned, signed with another secret, cut short or altered: refused before the native load is called', async () => {
    const signed = transportMetadataOf(source, ours, rank).metadata;
    const altered = Buffer.from(signed);
    altered[altered.length - 10]! ^= 0x01;
    const cases: [string, Uint8Array][] = [
      ['unsigned', source.metadata()],
      ['wrong-signature', transportMetadataOf(source, theirs, rank).metadata],
      ['truncated', signed.subarray(0, 42)],
      ['wrong-signature', signed.subarray(0, signed.length - 1)],
      ['wrong-signature', altered],
    ];
    const load = vi.spyOn(reader, 'loadPeerInBackground');
    const livePeers = reader.counters().livePeers;
    for (const [refusal, metadata] of cases) {
      await expect(loadRankPeer(reader, published(metadata), ours)).rejects.toThrow(
        expect.objectContaining({ code: 'TRANSPORT_METADATA_REFUSED', agentName: source.name, refusal }),
      );
    }
    // Validly signed, but replayed in the part of another rank of the worker.
    await expect(loadRankPeer(reader, published(signed, { ...rank, tpRank: 0 }), ours)).rejects.toThrow(
      expect.objectContaining({ code: 'TRANSPORT_METADATA_REFUSED', agentName: source.name, refusal: 'other-slot' }),
    );
    expect(load).not.toHaveBeenCalled();
    expect(reader.counters().livePeers).toBe(livePeers);
    load.mockRestore();
  });

  it('refuses arguments that are not an agent, a part or a ClusterSecret', async () => {
    const option = (name: string) => expect.objectContaining({ code: 'INVALID_REGISTRY_OPTION', option: name });
    const part = published(transportMetadataOf(source, ours, rank).metadata);
    expect(() => transportMetadataOf(source, 'secret' as never, rank)).toThrow(option('secret'));
    await expect(
      loadRankPeer(reader, part, { sign: () => Buffer.alloc(32), verifies: () => true } as never),
    ).rejects.toThrow(option('secret'));
    await expect(loadRankPeer({} as never, part, ours)).rejects.toThrow(option('agent.loadPeerInBackground'));
    await expect(loadRankPeer(reader, { ...part, parallel: undefined } as never, ours)).rejects.toThrow(
      option('part.parallel'),
    );
    await expect(loadRankPeer(reader, { ...part, transport: undefined } as never, ours)).rejects.toThrow(
      option('part.transport'),
    );
    await expect(
      loadRankPeer(reader, { ...part, transport: { agentName: 'a', metadata: 7 } } as never, ours),
    ).rejects.toThrow(option('part.transport.metadata'));
    expect(() => transportMetadataOf(source, ours, undefined as never)).toThrow(option('rank'));
  });
});
