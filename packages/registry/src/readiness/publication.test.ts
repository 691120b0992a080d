import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { rankPartsOf } from '../../test/helpers/rank-parts.js';
import { localBackends, type StoreUnderTest } from '../../test/helpers/stores.js';
import { DiscoveryLeaseError, RankPartPublicationError } from '../errors.js';
import { startRankPublication } from './publication.js';
import { watchWorkerReadiness, type WorkerReadinessWatch } from './worker-readiness.js';

const workerId = 'decode-lease';
const parts = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 });

describe.each(localBackends)('rank publication on $name discovery', (backend) => {
  let under: StoreUnderTest;
  let watch: WorkerReadinessWatch;
  let seen: string[];

  beforeEach(async () => {
    under = backend.open();
    seen = [];
    watch = await watchWorkerReadiness(under.store, workerId, { onChange: (r) => seen.push(r.ready ? 'ready' : r.reasons[0]!.kind) });
  });

  afterEach(async () => {
    await watch.close();
    await under.dispose();
  });

  it('keeps the parts published across many lease TTLs, and withdraws them and the lease on request', async () => {
    const keepAlive = vi.spyOn(under.store, 'keepAlive');
    const publication = await startRankPublication(under.store, parts, { leaseTtlMs: 1_500, renewEveryMs: 100 });
    // Twenty renewals span more than the TTL: without them the lease would have expired.
    await vi.waitFor(() => expect(keepAlive.mock.calls.length).toBeGreaterThanOrEqual(20), { timeout: 30_000, interval: 20 });
    await watch.settled();
    expect(seen).toEqual(['no-parts', 'ready']);
    await publication.withdraw();
    const renewals = keepAlive.mock.calls.length;
    await vi.waitFor(() => expect(seen.at(-1)).toBe('no-parts'), { timeout: 20_000, interval: 5 });
    await expect(under.store.keepAlive(publication.lease.id)).rejects.toThrow(DiscoveryLeaseError);
    expect(keepAlive.mock.calls.length).toBe(renewals + 1);
  });

  it('republishes under a new lease when its lease is found gone', async () => {
    const trouble: Error[] = [];
    const publication = await startRankPublication(under.store, parts, { leaseTtlMs: 60_000, renewEveryMs: 20, onTrouble: (error) => trouble.push(error) });
    const first = publication.lease.id;
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready']), { timeout: 20_000, interval: 5 });
    await under.store.revokeLease(first);
    await vi.waitFor(() => expect(publication.lease.id).not.toBe(first), { timeout: 20_000, interval: 5 });
    // Readiness was 'ready' before the revocation too: wait for the whole sequence, not its last step.
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready', 'no-parts', 'ready']), { timeout: 20_000, interval: 5 });
    expect(trouble[0]).toBeInstanceOf(DiscoveryLeaseError);
    await publication.withdraw();
  });

  it('refuses a renewal interval that would let the lease lapse', async () => {
    await expect(startRankPublication(under.store, parts, { leaseTtlMs: 1_000, renewEveryMs: 1_000 })).rejects.toThrow(RankPartPublicationError);
    await expect(startRankPublication(under.store, [], { leaseTtlMs: 1_000 })).rejects.toThrow(/at least one rank part/);
    await expect(startRankPublication(under.store, parts, { leaseTtlMs: Number.NaN })).rejects.toThrow(
      expect.objectContaining({ code: 'RANK_PART_PUBLICATION_REFUSED', message: expect.stringContaining('leaseTtlMs') }),
    );
  });

  it('still revokes its lease, withdrawing the parts, when deleting them fails', async () => {
    const publication = await startRankPublication(under.store, parts, { leaseTtlMs: 60_000 });
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready']), { timeout: 20_000, interval: 5 });
    const failure = new Error('commit refused');
    vi.spyOn(under.store, 'commit').mockRejectedValueOnce(failure);
    await expect(publication.withdraw()).rejects.toBe(failure);
    await expect(under.store.keepAlive(publication.lease.id)).rejects.toThrow(DiscoveryLeaseError);
    expect((await under.store.list('')).entries).toEqual([]);
  });

  it('revokes the lease it granted when publishing fails, leaving nothing behind', async () => {
    const grantLease = vi.spyOn(under.store, 'grantLease');
    const [tp0] = parts;
    const mixed = [tp0!, { ...tp0!, workerId: 'someone-else' }];
    await expect(startRankPublication(under.store, mixed, { leaseTtlMs: 60_000 })).rejects.toThrow(RankPartPublicationError);
    const granted = await grantLease.mock.results[0]!.value;
    await expect(under.store.keepAlive(granted.id)).rejects.toThrow(DiscoveryLeaseError);
    expect((await under.store.list('')).entries).toEqual([]);
  });
});
