import { deriveShard, pieceBytes, referenceGeometries } from '@kvreuse/descriptors';
import { loadTransport } from '@kvreuse/native-bindings';
import { describe, expect, it, vi } from 'vitest';
import {
  claimIncarnationEpoch,
  ClusterSecret,
  type DiscoveryStore,
  MemoryDiscoveryStore,
  openSqliteDiscovery,
  publishRankParts,
  watchWorkerReadiness,
  type WorkerReadiness,
} from '@kvreuse/discovery';
import { localBackends as localBackendsOf } from '@kvreuse-internal/test-support';
import { buildRankPart, loadRankPeer, registerRank, transportMetadataOf } from '../src/index.js';
import {
  identityOf,
  type PreparedRank,
  prepareWorker,
  registerAndPublish,
  tearDownWorker,
  type WorkerSetup,
} from './helpers/worker.js';

const transport = loadTransport();

const localBackends = localBackendsOf<DiscoveryStore>({ MemoryDiscoveryStore, openSqliteDiscovery });

describe.each(localBackends)(
  'a Qwen3-0.6B TP=2 worker from registration to readiness on $name discovery',
  (backend) => {
    it('registers 56 banks per rank, publishes parts whose metadata a peer can load, and becomes ready', async () => {
      const { store, dispose } = backend.open();
      const setup: WorkerSetup = {
        transport,
        backend: 'loopback',
        workerId: `decode-${backend.name}`,
        incarnation: 'inc-1',
        geometry: referenceGeometries['qwen3-0.6b'],
        tpSize: 2,
        blocks: 2,
      };
      const seen: WorkerReadiness[] = [];
      const watch = await watchWorkerReadiness(store, setup.workerId, {
        onChange: (readiness) => seen.push(readiness),
      });
      const prepared = await prepareWorker(setup);
      const lease = await store.grantLease(60_000);
      const ranks = await registerAndPublish(setup, prepared, store, lease.id);

      await vi.waitFor(() => expect(watch.current.ready).toBe(true), { timeout: 20_000, interval: 5 });
      const readiness = watch.current;
      if (!readiness.ready) throw new Error('unreachable');
      expect(readiness.worker.ranks.map((part) => part.banks.length)).toEqual([56, 56]);
      expect(seen.map((change) => change.ready)).toEqual([false, true]);

      // The published transport metadata is the agent's real blob, signed: another agent loads it and sees 56 regions.
      const reader = await transport.createAgent({
        name: `reader-${backend.name}-${process.pid}`,
        backend: 'loopback',
      });
      const part = readiness.worker.ranks[1]!;
      const peer = await loadRankPeer(reader, part, ClusterSecret.ofThisProcess());
      expect(peer.info().regionCount).toBe(56);
      expect(part.transport).toMatchObject({ agentName: prepared[1]!.agent.name, generation: 57 });
      expect(part.banks.map((bank) => bank.address)).toEqual(prepared[1]!.banks.map((bank) => bank.address));
      peer.unload();
      await reader.close();

      await store.revokeLease(lease.id);
      await vi.waitFor(() => expect(watch.current.ready).toBe(false), { timeout: 20_000, interval: 5 });
      await watch.close();
      await tearDownWorker(prepared, ranks);
      expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveAgents: 0 });
      await dispose();
    });

    it("a worker laid out as vLLM lays it out (K and V interleaved per block) publishes version 2 parts with each bank's plane stride, and becomes ready", async () => {
      const { store, dispose } = backend.open();
      const geometry = referenceGeometries['qwen3-0.6b'];
      const piece = pieceBytes(geometry, deriveShard(geometry, { tpRank: 0, tpSize: 2, ppRank: 0, ppSize: 1 }));
      const setup: WorkerSetup = {
        transport,
        backend: 'loopback',
        workerId: `vllm-${backend.name}`,
        incarnation: 'inc-1',
        geometry,
        tpSize: 2,
        blocks: 3,
        planeStride: piece,
      };
      const watch = await watchWorkerReadiness(store, setup.workerId, { onChange: () => {} });
      const prepared = await prepareWorker(setup);
      const lease = await store.grantLease(60_000);
      const ranks = await registerAndPublish(setup, prepared, store, lease.id);

      await vi.waitFor(() => expect(watch.current.ready).toBe(true), { timeout: 20_000, interval: 5 });
      const readiness = watch.current;
      if (!readiness.ready) throw new Error('unreachable');
      for (const part of readiness.worker.ranks) {
        expect(part.version).toBe(2);
        expect(part.banks).toHaveLength(geometry.numLayers); // one bank per layer, both planes in it
        for (const bank of part.banks)
          expect(bank).toMatchObject({
            planeStride: BigInt(piece),
            blockStride: BigInt(2 * piece),
            bytes: BigInt(3 * 2 * piece),
          });
      }

      await watch.close();
      await store.revokeLease(lease.id);
      await tearDownWorker(prepared, ranks);
      expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveAgents: 0 });
      await dispose();
    });

    it('a rank that fails to register publishes nothing: the worker stays not ready and that agent holds nothing', async () => {
      const { store, dispose } = backend.open();
      const setup: WorkerSetup = {
        transport,
        backend: 'loopback',
        workerId: `failing-${backend.name}`,
        incarnation: 'inc-1',
        geometry: referenceGeometries['qwen3-0.6b'],
        tpSize: 2,
        blocks: 2,
      };
      const watch = await watchWorkerReadiness(store, setup.workerId, { onChange: () => {} });
      const [rank0, rank1] = (await prepareWorker(setup)) as [PreparedRank, PreparedRank];
      const lease = await store.grantLease(60_000);
      const { epoch } = await claimIncarnationEpoch(store, setup);
      // Each rank registers and publishes on its own, as its own process would.
      const publishRank = async ({ agent, banks }: PreparedRank) => {
        const rank = await registerRank({ agent, banks });
        await publishRankParts(
          store,
          [
            buildRankPart(
              identityOf(setup),
              rank,
              transportMetadataOf(agent, ClusterSecret.ofThisProcess(), { ...setup, ...rank }),
            ),
          ],
          { lease: lease.id, epoch },
        );
        return rank;
      };
      const registered0 = await publishRank(rank0);
      const before = rank1.agent.counters();
      rank1.agent.faults.failNth('register', 30, 'BACKEND');
      const error = await publishRank(rank1).catch((e: unknown) => e);

      expect(error).toMatchObject({
        code: 'RANK_REGISTRATION_FAILED',
        rank: { tpRank: 1 },
        bank: { index: 29 },
        nativeCode: 'BACKEND',
      });
      expect(rank1.agent.counters()).toMatchObject({
        liveRegistrations: before.liveRegistrations,
        registeredBytes: before.registeredBytes,
      });
      const { entries } = await store.list('kvreuse/');
      // The incarnation's epoch claim and rank 0's part; nothing of rank 1.
      expect(entries.map((entry) => entry.key)).toEqual([
        `kvreuse/workers/${setup.workerId}/epoch`,
        `kvreuse/workers/${setup.workerId}/epochs/inc-1`,
        `kvreuse/workers/${setup.workerId}/incarnations/inc-1/pp0-tp0`,
      ]);
      await vi.waitFor(
        () =>
          expect(watch.current).toMatchObject({
            ready: false,
            reasons: [{ kind: 'incomplete', missing: [{ tpRank: 1, ppRank: 0 }] }],
          }),
        {
          timeout: 20_000,
          interval: 5,
        },
      );
      await watch.close();
      await tearDownWorker([rank0, rank1], [registered0]);
      expect(transport.counters()).toMatchObject({ liveRegistrations: 0, liveAllocations: 0, liveAgents: 0 });
      await dispose();
    });
  },
);
