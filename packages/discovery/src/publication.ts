import type { RankPart } from '@kvreuse/descriptors';
import { messageOf } from '@kvreuse/errors';
import { maxLeaseTtlMs } from './common.js';
import { DiscoveryLeaseError, RankPartPublicationError, SupersededError } from './errors.js';
import { assertNewestEpoch, claimIncarnationEpoch, type IncarnationEpoch } from './incarnation-epoch.js';
import { checkFunction } from './options.js';
import { checkPublishableParts, checkPublishing, publishRankParts } from './publish.js';
import { rankPartKey } from './rank-part-keys.js';
import type { DiscoveryStore, Lease } from './types.js';

export interface RankPublicationOptions {
  /** The lease TTL (e.g. the `discovery.leaseTtlMs` setting); a crashed worker's parts vanish after it. */
  readonly leaseTtlMs: number;
  /** How often the lease is renewed (default a third of the TTL). */
  readonly renewEveryMs?: number;
  readonly keyPrefix?: string;
  /**
   * Told about renewal trouble: a failed renewal (retried at the next tick), or a lease found gone
   * (expired while the process stalled, or revoked), after which the parts are published again
   * under a new lease — unless the incarnation was superseded meanwhile. A callback that throws is
   * reported as a process warning; the renewals go on.
   */
  readonly onTrouble?: (error: Error) => void;
  /**
   * Told once, when a newer incarnation of the worker is found to hold a larger epoch. The
   * publication has then stopped for good: it never renews or republishes again, and its lease is
   * revoked (its parts were, or are then, deleted).
   */
  readonly onSuperseded?: (error: SupersededError) => void;
}

export interface RankPublication {
  /** The lease the parts are currently published under. */
  readonly lease: Lease;
  /** The epoch discovery handed this incarnation; every write of the publication is fenced by it. */
  readonly epoch: number;
  /** Why the publication stopped for good, once a newer incarnation superseded it; otherwise undefined. */
  readonly superseded: SupersededError | undefined;
  /**
   * Stops renewing, withdraws exactly these parts (other ranks' parts stay) and revokes the lease.
   * Once withdrawn, a second call does nothing and resolves; after a failed withdrawal it tries again.
   */
  withdraw(): Promise<void>;
}

/** Checks what `startRankPublication` is given; returns how often it renews the lease. */
function checkPublicationOptions(
  store: DiscoveryStore,
  parts: readonly RankPart[],
  options: RankPublicationOptions,
): number {
  checkPublishing(store, parts, options);
  for (const callback of ['onTrouble', 'onSuperseded'] as const)
    if (options[callback] !== undefined) checkFunction(`options.${callback}`, options[callback]);
  if (!Number.isSafeInteger(options.leaseTtlMs) || options.leaseTtlMs < 2 || options.leaseTtlMs > maxLeaseTtlMs) {
    throw new RankPartPublicationError(
      'leaseTtlMs',
      options.leaseTtlMs,
      `must be a whole number of milliseconds, at least 2 and at most ${maxLeaseTtlMs} (etcd's maximum, 9,000,000,000 s)`,
    );
  }
  const renewEveryMs = options.renewEveryMs ?? Math.max(1, Math.floor(options.leaseTtlMs / 3));
  if (!Number.isSafeInteger(renewEveryMs) || renewEveryMs < 1 || renewEveryMs >= options.leaseTtlMs) {
    throw new RankPartPublicationError(
      'renewEveryMs',
      renewEveryMs,
      `must be a whole number of milliseconds below the lease TTL (${options.leaseTtlMs})`,
    );
  }
  return renewEveryMs;
}

/** Grants a lease and publishes the parts under it, fenced by `fence.epoch`; revokes the lease if publishing fails. */
async function publishUnderLease(
  store: DiscoveryStore,
  parts: readonly RankPart[],
  leaseTtlMs: number,
  fence: { readonly keyPrefix?: string; readonly epoch: number },
): Promise<Lease> {
  const lease = await store.grantLease(leaseTtlMs);
  try {
    await publishRankParts(store, parts, { ...fence, lease: lease.id });
  } catch (error) {
    // Nothing was published under it: give the lease back instead of leaving it to expire.
    await store.revokeLease(lease.id).catch(() => undefined);
    throw error;
  }
  return lease;
}

/** Deletes the parts in one commit, then revokes their lease. */
async function withdrawUnder(
  store: DiscoveryStore,
  parts: readonly RankPart[],
  lease: Lease,
  keyPrefix: string | undefined,
): Promise<void> {
  try {
    await store.commit(parts.map((part) => ({ type: 'delete', key: rankPartKey(part, part.parallel, keyPrefix) })));
  } catch (error) {
    // Revoking the lease withdraws the parts too; it is tried even so, and the first failure reported.
    await store.revokeLease(lease.id).catch(() => undefined);
    throw error;
  }
  await store.revokeLease(lease.id);
}

/** Calls the publication's `callback`; one that throws is reported as a warning: it must not end the renewals (nor the withdrawal, which waits for them). */
function tell<E extends Error>(
  options: RankPublicationOptions,
  callback: 'onTrouble' | 'onSuperseded',
  error: E,
): void {
  try {
    (options[callback] as ((error: E) => void) | undefined)?.(error);
  } catch (thrown) {
    process.emitWarning(`discovery: a rank publication's ${callback} callback threw: ${messageOf(thrown)}`);
  }
}

/**
 * Publishes rank parts of one worker incarnation under a lease and keeps the lease alive until
 * `withdraw()`. It first claims the incarnation's epoch (refused with `SupersededError` if a newer
 * incarnation already holds a larger one). At every renewal it checks, before anything else, that
 * its epoch is still the worker's newest — a process stopped past its lease learns on resume that
 * it was replaced — and then renews; if the lease is found gone it checks the epoch again and
 * republishes under a new lease (readers saw the worker not ready meanwhile, which is the truth).
 * Superseded, it stops for good and says so (`onSuperseded`, `superseded`). The renewal timer does
 * not keep the process alive.
 */
export async function startRankPublication(
  store: DiscoveryStore,
  parts: readonly RankPart[],
  options: RankPublicationOptions,
): Promise<RankPublication> {
  const renewEveryMs = checkPublicationOptions(store, parts, options);
  const keyOptions = options.keyPrefix === undefined ? {} : { keyPrefix: options.keyPrefix };
  const claimed: IncarnationEpoch = await claimIncarnationEpoch(
    store,
    checkPublishableParts(parts, options.keyPrefix),
    keyOptions,
  );
  const publishUnderNewLease = (): Promise<Lease> =>
    publishUnderLease(store, parts, options.leaseTtlMs, { ...keyOptions, epoch: claimed.epoch });

  let lease = await publishUnderNewLease();
  let stopped = false;
  let superseded: SupersededError | undefined;
  let renewing: Promise<void> = Promise.resolve();
  const stopSuperseded = async (error: SupersededError): Promise<void> => {
    stopped = true;
    superseded = error;
    clearInterval(timer);
    await store.revokeLease(lease.id).catch(() => undefined);
    tell(options, 'onSuperseded', error);
  };
  const renew = async (): Promise<void> => {
    try {
      // Before anything else: while this process was stopped, a newer incarnation may have taken over.
      await assertNewestEpoch(store, claimed, 'renewing the lease', keyOptions);
      try {
        await store.keepAlive(lease.id);
      } catch (error) {
        if (!(error instanceof DiscoveryLeaseError)) throw error;
        tell(options, 'onTrouble', error);
        await assertNewestEpoch(store, claimed, 'republishing after the lease was lost', keyOptions);
        lease = await publishUnderNewLease();
      }
    } catch (error) {
      if (stopped) return;
      if (error instanceof SupersededError) await stopSuperseded(error);
      else tell(options, 'onTrouble', error as Error);
    }
  };
  const timer = setInterval(() => {
    // One renewal at a time; a slow store delays the next tick instead of piling calls up.
    renewing = renewing.then(() => (stopped ? undefined : renew()));
  }, renewEveryMs);
  timer.unref();

  const withdrawOnce = async (): Promise<void> => {
    stopped = true;
    clearInterval(timer);
    await renewing;
    await withdrawUnder(store, parts, lease, options.keyPrefix);
  };
  let withdrawal: Promise<void> | undefined;

  return {
    get lease() {
      return lease;
    },
    epoch: claimed.epoch,
    get superseded() {
      return superseded;
    },
    withdraw() {
      withdrawal ??= withdrawOnce().catch((error: unknown) => {
        withdrawal = undefined;
        throw error;
      });
      return withdrawal;
    },
  };
}
