import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { rankPartsOf } from '@kvreuse-internal/test-support';
import { localBackends, type StoreUnderTest } from '../test/helpers/stores.js';
import { DiscoveryLeaseError, DiscoveryUnavailableError, RankPartPublicationError, SupersededError } from './errors.js';
import { claimIncarnationEpoch, readWorkerEpoch } from './incarnation-epoch.js';
import { startRankPublication } from './publication.js';
import { publishRankParts } from './publish.js';
import { workerPartsPrefix } from './rank-part-keys.js';
import { watchWorkerReadiness, type WorkerReadinessWatch } from './worker-readiness.js';

const workerId = 'decode-lease';
const parts = rankPartsOf({ workerId, incarnation: 'inc-a', tpSize: 2 });
const replacement = rankPartsOf({ workerId, incarnation: 'inc-b', tpSize: 2, generation: 2 });

describe.each(localBackends)('rank publication on $name discovery', (backend) => {
  let under: StoreUnderTest;
  let watch: WorkerReadinessWatch;
  let seen: string[];

  beforeEach(async () => {
    under = backend.open();
    seen = [];
    watch = await watchWorkerReadiness(under.store, workerId, {
      onChange: (r) => seen.push(r.ready ? `ready ${r.incarnation}` : r.reasons[0]!.kind),
    });
  });

  afterEach(async () => {
    await watch.close();
    await under.dispose();
  });

  /** Lets the lease clock pass `ms`, then touches the store so that it expires what the clock passed. */
  async function elapse(ms: number): Promise<void> {
    under.clock.advance(ms);
    await under.store.get(`${workerPartsPrefix(workerId)}touch`);
  }

  it('keeps the parts published across many lease TTLs, and withdraws them and the lease on request', async () => {
    const keepAlive = vi.spyOn(under.store, 'keepAlive');
    const publication = await startRankPublication(under.store, parts, { leaseTtlMs: 1_500, renewEveryMs: 20 });
    // Twenty steps of 1,000 ms of lease time, each followed by a renewal: 20 s, more than 13 TTLs.
    for (let step = 0; step < 20; step++) {
      const before = keepAlive.mock.calls.length;
      await elapse(1_000);
      await vi.waitFor(() => expect(keepAlive.mock.calls.length).toBeGreaterThan(before), {
        timeout: 20_000,
        interval: 5,
      });
    }
    expect((await under.store.list(workerPartsPrefix(workerId))).entries).toHaveLength(2);
    await watch.settled();
    expect(seen).toEqual(['no-parts', 'ready inc-a']);
    await publication.withdraw();
    const renewals = keepAlive.mock.calls.length;
    await vi.waitFor(() => expect(seen.at(-1)).toBe('no-parts'), { timeout: 20_000, interval: 5 });
    await expect(under.store.keepAlive(publication.lease.id)).rejects.toThrow(DiscoveryLeaseError);
    expect(keepAlive.mock.calls.length).toBe(renewals + 1);
  });

  it('withdraws once: a second withdraw() resolves without touching the store; the readiness watch closes twice too', async () => {
    const publication = await startRankPublication(under.store, parts, { leaseTtlMs: 60_000 });
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready inc-a']), { timeout: 20_000, interval: 5 });
    await publication.withdraw();
    const commit = vi.spyOn(under.store, 'commit');
    const revokeLease = vi.spyOn(under.store, 'revokeLease');
    await expect(publication.withdraw()).resolves.toBeUndefined();
    expect([commit.mock.calls.length, revokeLease.mock.calls.length]).toEqual([0, 0]);
    await watch.close();
    await expect(watch.close()).resolves.toBeUndefined();
  });

  it('republishes under a new lease when its lease is found gone and it is still the newest incarnation', async () => {
    const trouble: Error[] = [];
    const publication = await startRankPublication(under.store, parts, {
      leaseTtlMs: 60_000,
      renewEveryMs: 20,
      onTrouble: (error) => trouble.push(error),
    });
    const first = publication.lease.id;
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready inc-a']), { timeout: 20_000, interval: 5 });
    await under.store.revokeLease(first);
    await vi.waitFor(() => expect(publication.lease.id).not.toBe(first), { timeout: 20_000, interval: 5 });
    // Readiness was 'ready' before the revocation too: wait for the whole sequence, not its last step.
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready inc-a', 'no-parts', 'ready inc-a']), {
      timeout: 20_000,
      interval: 5,
    });
    expect(trouble[0]).toBeInstanceOf(DiscoveryLeaseError);
    expect(publication.superseded).toBeUndefined();
    await publication.withdraw();
  });

  it('stalled past its lease while a newer incarnation took over: on resume it checks its epoch first, is told it was superseded, and never republishes', async () => {
    const superseded: SupersededError[] = [];
    const publication = await startRankPublication(under.store, parts, {
      leaseTtlMs: 1_500,
      renewEveryMs: 20,
      onSuperseded: (error) => superseded.push(error),
    });
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready inc-a']), { timeout: 20_000, interval: 5 });

    // The process stops: its next renewal tick is held before its first step.
    const get = under.store.get.bind(under.store);
    let resume: () => void = () => {};
    const stopped = new Promise<void>((resolve) => (resume = resolve));
    const heldAt = new Promise<void>((entered) => {
      vi.spyOn(under.store, 'get').mockImplementationOnce(async (key) => {
        entered();
        await stopped;
        return get(key);
      });
    });
    await heldAt;
    vi.mocked(under.store.get).mockRestore();

    // Meanwhile its lease lapses and the replacement claims a newer epoch and publishes.
    await elapse(1_500);
    await vi.waitFor(() => expect(seen.at(-1)).toBe('no-parts'), { timeout: 20_000, interval: 5 });
    const next = await claimIncarnationEpoch(under.store, replacement[0]!);
    const lease = await under.store.grantLease(60_000);
    await publishRankParts(under.store, replacement, { lease: lease.id, epoch: next.epoch });
    await vi.waitFor(() => expect(seen.at(-1)).toBe('ready inc-b'), { timeout: 20_000, interval: 5 });

    const grantLease = vi.spyOn(under.store, 'grantLease');
    const commit = vi.spyOn(under.store, 'commit');
    const keepAlive = vi.spyOn(under.store, 'keepAlive');
    resume();
    await vi.waitFor(() => expect(superseded).toHaveLength(1), { timeout: 20_000, interval: 5 });
    expect(superseded[0]).toBeInstanceOf(SupersededError);
    expect(superseded[0]).toMatchObject({
      code: 'SUPERSEDED',
      workerId,
      incarnation: 'inc-a',
      epoch: publication.epoch,
      newerEpoch: next.epoch,
      newerIncarnation: 'inc-b',
    });
    expect(publication.superseded).toBe(superseded[0]);
    // It checked its epoch before anything else: no renewal was tried, nothing was written.
    expect(keepAlive).not.toHaveBeenCalled();
    expect(grantLease).not.toHaveBeenCalled();
    expect(commit).not.toHaveBeenCalled();
    // withdraw() waits for any renewal in flight; none republished, and the newer parts stay.
    await publication.withdraw();
    expect(grantLease).not.toHaveBeenCalled();
    expect(superseded).toHaveLength(1);
    await watch.settled();
    expect(seen).toEqual(['no-parts', 'ready inc-a', 'no-parts', 'ready inc-b']);
    const published = await under.store.list(workerPartsPrefix(workerId));
    expect(published.entries.map((entry) => entry.key.slice(workerPartsPrefix(workerId).length))).toEqual([
      'inc-b/pp0-tp0',
      'inc-b/pp0-tp1',
    ]);
  });

  it('an onTrouble callback that throws does not end the renewals, and withdraw() still withdraws', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const warnings = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      const keepAlive = vi
        .spyOn(under.store, 'keepAlive')
        .mockRejectedValueOnce(new DiscoveryUnavailableError(under.store.backend, 'keepAlive', undefined));
      const publication = await startRankPublication(under.store, parts, {
        leaseTtlMs: 3_000,
        renewEveryMs: 1_000,
        onTrouble: () => {
          throw new Error('the log sink is gone');
        },
      });
      await vi.advanceTimersByTimeAsync(1_000); // the renewal fails and onTrouble throws
      await vi.advanceTimersByTimeAsync(1_000); // the next renewal still runs
      expect(keepAlive).toHaveBeenCalledTimes(2);
      expect(warnings).toHaveBeenCalledWith(expect.stringContaining('onTrouble callback threw: the log sink is gone'));
      await publication.withdraw();
      expect((await under.store.list(workerPartsPrefix(workerId))).entries).toEqual([]);
    } finally {
      warnings.mockRestore();
      vi.useRealTimers();
    }
  });

  it('refuses to start for an incarnation that a newer one superseded, leaving nothing behind', async () => {
    await claimIncarnationEpoch(under.store, parts[0]!);
    const newer = await claimIncarnationEpoch(under.store, replacement[0]!);
    const grantLease = vi.spyOn(under.store, 'grantLease');
    await expect(startRankPublication(under.store, parts, { leaseTtlMs: 60_000 })).rejects.toMatchObject({
      code: 'SUPERSEDED',
      incarnation: 'inc-a',
      newerEpoch: newer.epoch,
    });
    expect(grantLease).not.toHaveBeenCalled();
    expect((await under.store.list(workerPartsPrefix(workerId))).entries).toEqual([]);
  });

  it('refuses a renewal interval that would let the lease lapse', async () => {
    await expect(startRankPublication(under.store, parts, { leaseTtlMs: 1_000, renewEveryMs: 1_000 })).rejects.toThrow(
      RankPartPublicationError,
    );
    await expect(startRankPublication(under.store, [], { leaseTtlMs: 1_000 })).rejects.toThrow(
      /at least one rank part/,
    );
    await expect(startRankPublication(under.store, parts, { leaseTtlMs: Number.NaN })).rejects.toThrow(
      expect.objectContaining({
        code: 'RANK_PART_PUBLICATION_REFUSED',
        message: expect.stringContaining('leaseTtlMs'),
      }),
    );
  });

  it("refuses a lease TTL over etcd's maximum up front, naming leaseTtlMs and the limit", async () => {
    const grantLease = vi.spyOn(under.store, 'grantLease');
    await expect(startRankPublication(under.store, parts, { leaseTtlMs: 9_000_000_001_000 })).rejects.toThrow(
      expect.objectContaining({
        code: 'RANK_PART_PUBLICATION_REFUSED',
        field: 'leaseTtlMs',
        message: expect.stringContaining('at most 9000000000000'),
      }),
    );
    expect(grantLease).not.toHaveBeenCalled();
    expect(await readWorkerEpoch(under.store, workerId)).toBeUndefined();
  });

  it('still revokes its lease, withdrawing the parts, when deleting them fails', async () => {
    const publication = await startRankPublication(under.store, parts, { leaseTtlMs: 60_000 });
    await vi.waitFor(() => expect(seen).toEqual(['no-parts', 'ready inc-a']), { timeout: 20_000, interval: 5 });
    const failure = new Error('commit refused');
    vi.spyOn(under.store, 'commit').mockRejectedValueOnce(failure);
    await expect(publication.withdraw()).rejects.toBe(failure);
    await expect(under.store.keepAlive(publication.lease.id)).rejects.toThrow(DiscoveryLeaseError);
    expect((await under.store.list(workerPartsPrefix(workerId))).entries).toEqual([]);
  });

  it('refuses parts of several workers before claiming or granting anything', async () => {
    const grantLease = vi.spyOn(under.store, 'grantLease');
    const [tp0] = parts;
    const mixed = [tp0!, { ...tp0!, workerId: 'someone-else' }];
    await expect(startRankPublication(under.store, mixed, { leaseTtlMs: 60_000 })).rejects.toThrow(
      RankPartPublicationError,
    );
    expect(grantLease).not.toHaveBeenCalled();
    expect((await under.store.list('')).entries).toEqual([]);
  });

  it('revokes the lease it granted when publishing fails, leaving no part behind', async () => {
    // Claimed already, so that the failing commit is the publication's, not the claim's.
    await claimIncarnationEpoch(under.store, parts[0]!);
    const grantLease = vi.spyOn(under.store, 'grantLease');
    vi.spyOn(under.store, 'commit').mockRejectedValueOnce(new Error('disk full'));
    await expect(startRankPublication(under.store, parts, { leaseTtlMs: 60_000 })).rejects.toThrow('disk full');
    const granted = await grantLease.mock.results[0]!.value;
    await expect(under.store.keepAlive(granted.id)).rejects.toThrow(DiscoveryLeaseError);
    expect((await under.store.list(workerPartsPrefix(workerId))).entries).toEqual([]);
  });
});
