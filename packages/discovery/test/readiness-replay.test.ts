// A record written around the fence never takes readiness: an old incarnation's rank parts written
// again through the public store.put, with an epoch raised above the fence or equal to it, are refused
// by the watcher that was running and by watchers started afterwards alike, on every backend. The
// incarnation that counts is the one the fence (the backend's revision of its claim) names.
import type { RankPart } from '@kvreuse/descriptors';
import { etcdRuns, rankPartsOf } from '@kvreuse-internal/test-support';
import { describe, expect, it, vi } from 'vitest';
import {
  claimIncarnationEpoch,
  type DiscoveryStore,
  encodeRankPartRecord,
  publishRankParts,
  rankPartKey,
  watchWorkerReadiness,
  withdrawRankParts,
  type WorkerReadiness,
} from '../src/index.js';
import { useEtcdStore } from './etcd-store.js';
import { localBackends } from './helpers/stores.js';

vi.setConfig({ testTimeout: 60_000 });

const summary = (readiness: WorkerReadiness): string =>
  readiness.ready
    ? `ready ${readiness.incarnation}`
    : `not ready: ${readiness.reasons.map((reason) => reason.kind).join(', ')}`;

/** What a watcher started now reports first. */
async function lateView(store: DiscoveryStore, workerId: string): Promise<string> {
  const seen: string[] = [];
  const watch = await watchWorkerReadiness(store, workerId, {
    onChange: (readiness) => seen.push(summary(readiness)),
    logger: { warn: () => undefined },
  });
  await watch.close();
  return seen[0]!;
}

/** Writes `parts` the way an intruder can: raw puts of well-formed records, with the epoch it chooses. */
async function replay(store: DiscoveryStore, parts: readonly RankPart[], epoch: number, lease: string): Promise<void> {
  for (const part of parts)
    await store.put(rankPartKey(part, part.parallel), encodeRankPartRecord(part, epoch), { lease });
}

async function scenario(store: DiscoveryStore, workerId: string): Promise<void> {
  const lease = (await store.grantLease(60_000)).id;
  const old = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 });
  const fresh = rankPartsOf({ workerId, incarnation: 'inc-b', tpSize: 2, generation: 2 });
  const oldClaim = await claimIncarnationEpoch(store, old[0]!);
  await publishRankParts(store, old, { lease, epoch: oldClaim.epoch });
  const seen: string[] = [];
  const warnings: string[] = [];
  const running = await watchWorkerReadiness(store, workerId, {
    onChange: (readiness) => seen.push(summary(readiness)),
    logger: { warn: (message) => warnings.push(message) },
  });
  const freshClaim = await claimIncarnationEpoch(store, fresh[0]!);
  await publishRankParts(store, fresh, { lease, epoch: freshClaim.epoch });

  // Raised: the old incarnation's parts again, claiming an epoch above the fence's.
  const raised = (await store.list(`${workerId}/`)).revision + 1_000;
  await replay(store, old, raised, lease);
  expect(await lateView(store, workerId)).toBe('ready inc-b');
  // Equal: claiming the fence's own epoch, with the old incarnation (whose keys sort first).
  await replay(store, old, freshClaim.epoch, lease);
  expect(await lateView(store, workerId)).toBe('ready inc-b');

  // With the real parts withdrawn, only the replayed ones are left: nobody is ready.
  await withdrawRankParts(store, { workerId, incarnation: 'inc-b' });
  expect(await lateView(store, workerId)).toBe('not ready: fence-mismatch');
  await vi.waitFor(() => expect(seen).toHaveLength(4), { timeout: 30_000, interval: 5 });
  await running.settled();
  await running.close();
  // The running watcher saw every state in order, and inc-a never became ready again.
  expect(seen).toEqual(['ready inc-a', 'not ready: superseded', 'ready inc-b', 'not ready: fence-mismatch']);
  expect(warnings.join('\n')).toContain(
    `incarnation inc-a claims epoch ${freshClaim.epoch}, but the epoch fence holds incarnation inc-b at epoch ${freshClaim.epoch}`,
  );
  await store.revokeLease(lease);
}

describe.each(localBackends)('a replayed rank part on $name discovery', (backend) => {
  it('with a raised or an equal epoch never takes readiness; running and new watchers agree', async () => {
    const { store, dispose } = backend.open();
    try {
      await scenario(store, 'decode-replayed');
    } finally {
      await dispose();
    }
  });
});

describe.skipIf(!etcdRuns)('a replayed rank part on etcd discovery', () => {
  const etcd = useEtcdStore();
  it('with a raised or an equal epoch never takes readiness; running and new watchers agree', async () => {
    await scenario(etcd.store, 'decode-replayed');
  });
});
