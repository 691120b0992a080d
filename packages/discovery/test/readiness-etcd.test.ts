// Readiness over a real etcd: ready once complete, withdrawn while etcd is down (recomputed, never
// assumed, when it is back), and withdrawn when the worker's lease is revoked. A watcher cut off
// from etcd while the parts change behind it never reports the state it knew before as current.
import { afterAll, beforeAll, expect, test, vi } from 'vitest';
import {
  claimIncarnationEpoch,
  connectEtcdDiscovery,
  type EtcdDiscoveryStore,
  publishRankParts,
  watchWorkerReadiness,
  type WorkerReadiness,
} from '../src/index.js';
import { etcdBinary, EtcdProxy, etcdRequired, EtcdServer, rankPartsOf } from '@kvreuse-internal/test-support';

vi.setConfig({ testTimeout: 90_000 });

const runs = etcdBinary !== undefined || etcdRequired;
let server: EtcdServer;
let store: EtcdDiscoveryStore;

beforeAll(async () => {
  if (!runs) return;
  server = await EtcdServer.start();
  store = connectEtcdDiscovery({ hosts: server.url, requestTimeoutMs: 2_000, maxReconnectDelayMs: 500 });
}, 60_000);

afterAll(async () => {
  await store?.close();
  await server?.stop();
});

const summary = (readiness: WorkerReadiness): string =>
  readiness.ready
    ? `ready ${readiness.incarnation}`
    : `not ready: ${readiness.reasons.map((reason) => reason.kind).join(', ')}`;

test.skipIf(!runs)(
  'readiness follows the parts on etcd, and an etcd outage withdraws it until etcd is back',
  async () => {
    const seen: string[] = [];
    const watch = await watchWorkerReadiness(store, 'decode-etcd', {
      onChange: (readiness) => seen.push(summary(readiness)),
    });
    const waitFor = (count: number) =>
      vi.waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(count), { timeout: 30_000, interval: 20 });
    const [tp0, tp1] = rankPartsOf({ workerId: 'decode-etcd', incarnation: 'inc-1', tpSize: 2 });
    const lease = await store.grantLease(60_000);
    const { epoch } = await claimIncarnationEpoch(store, { workerId: 'decode-etcd', incarnation: 'inc-1' });
    await publishRankParts(store, [tp0!], { lease: lease.id, epoch });
    await waitFor(2);
    await publishRankParts(store, [tp1!], { lease: lease.id, epoch });
    await waitFor(3);

    await server.kill();
    await waitFor(4);
    await server.restart();
    await waitFor(5);

    await store.revokeLease(lease.id);
    await waitFor(6);
    await watch.close();
    expect(seen).toEqual([
      'not ready: no-parts',
      'not ready: incomplete',
      'ready inc-1',
      'not ready: discovery-outage',
      'ready inc-1',
      'not ready: no-parts',
    ]);
  },
);

test.skipIf(!runs)(
  'a watcher cut off from etcd goes from the outage straight to what the store holds now',
  async () => {
    const proxy = await EtcdProxy.start(server);
    const cutOff = connectEtcdDiscovery({ hosts: proxy.url, requestTimeoutMs: 2_000, maxReconnectDelayMs: 500 });
    try {
      const seen: string[] = [];
      const watch = await watchWorkerReadiness(cutOff, 'decode-cut', {
        onChange: (readiness) => seen.push(summary(readiness)),
      });
      const waitFor = (count: number) =>
        vi.waitFor(() => expect(seen.length).toBeGreaterThanOrEqual(count), { timeout: 30_000, interval: 20 });
      const first = await store.grantLease(60_000);
      const firstEpoch = await claimIncarnationEpoch(store, { workerId: 'decode-cut', incarnation: 'inc-1' });
      await publishRankParts(store, rankPartsOf({ workerId: 'decode-cut', incarnation: 'inc-1', tpSize: 2 }), {
        lease: first.id,
        epoch: firstEpoch.epoch,
      });
      await waitFor(2);

      // The parts vanish behind the watcher: when it is back it must not call inc-1 ready again.
      await proxy.kill();
      await waitFor(3);
      await store.revokeLease(first.id);
      await proxy.restart();
      await waitFor(4);

      // A new incarnation appears behind the watcher: it is ready when the watcher is back.
      await proxy.kill();
      await waitFor(5);
      const second = await store.grantLease(60_000);
      const secondEpoch = await claimIncarnationEpoch(store, { workerId: 'decode-cut', incarnation: 'inc-2' });
      await publishRankParts(store, rankPartsOf({ workerId: 'decode-cut', incarnation: 'inc-2', tpSize: 2 }), {
        lease: second.id,
        epoch: secondEpoch.epoch,
      });
      await proxy.restart();
      await waitFor(6);
      await watch.settled();
      await watch.close();
      expect(seen).toEqual([
        'not ready: no-parts',
        'ready inc-1',
        'not ready: discovery-outage',
        'not ready: no-parts',
        'not ready: discovery-outage',
        'ready inc-2',
      ]);
    } finally {
      await cutOff.close();
      await proxy.stop();
    }
  },
);
