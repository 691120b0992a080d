import type { RankPart } from '@kvreuse/descriptors';
import type { DiscoveryStore, Lease } from '../discovery/types.js';
import { DiscoveryLeaseError, RankPartPublicationError } from '../errors.js';
import { publishRankParts } from './publish.js';
import { rankPartKey } from './rank-part-keys.js';

export interface RankPublicationOptions {
  /** The lease TTL (e.g. the `discovery.leaseTtlMs` setting); a crashed worker's parts vanish after it. */
  readonly leaseTtlMs: number;
  /** How often the lease is renewed (default a third of the TTL). */
  readonly renewEveryMs?: number;
  readonly keyPrefix?: string;
  /**
   * Told about renewal trouble: a failed renewal (retried at the next tick), or a lease found gone
   * (expired while the process stalled, or revoked), after which the parts are published again
   * under a new lease.
   */
  readonly onTrouble?: (error: Error) => void;
}

export interface RankPublication {
  /** The lease the parts are currently published under. */
  readonly lease: Lease;
  /** Stops renewing, withdraws exactly these parts (other ranks' parts stay) and revokes the lease. */
  withdraw(): Promise<void>;
}

/**
 * Publishes rank parts of one worker incarnation under a lease and keeps the lease alive until
 * `withdraw()`. If the lease is found gone, the parts are republished under a new one (readers saw
 * the worker not ready meanwhile, which is the truth). The renewal timer does not keep the process alive.
 */
export async function startRankPublication(store: DiscoveryStore, parts: readonly RankPart[], options: RankPublicationOptions): Promise<RankPublication> {
  if (!Number.isSafeInteger(options.leaseTtlMs) || options.leaseTtlMs < 2) {
    throw new RankPartPublicationError('leaseTtlMs', options.leaseTtlMs, 'must be a whole number of milliseconds, at least 2');
  }
  const renewEveryMs = options.renewEveryMs ?? Math.max(1, Math.floor(options.leaseTtlMs / 3));
  if (!Number.isSafeInteger(renewEveryMs) || renewEveryMs < 1 || renewEveryMs >= options.leaseTtlMs) {
    throw new RankPartPublicationError('renewEveryMs', renewEveryMs, `must be a whole number of milliseconds below the lease TTL (${options.leaseTtlMs})`);
  }
  if (parts.length === 0) throw new RankPartPublicationError('parts', parts, 'at least one rank part is needed');
  const publishOptions = options.keyPrefix === undefined ? {} : { keyPrefix: options.keyPrefix };
  const publishUnderNewLease = async (): Promise<Lease> => {
    const lease = await store.grantLease(options.leaseTtlMs);
    try {
      await publishRankParts(store, parts, { ...publishOptions, lease: lease.id });
    } catch (error) {
      // Nothing was published under it: give the lease back instead of leaving it to expire.
      await store.revokeLease(lease.id).catch(() => undefined);
      throw error;
    }
    return lease;
  };

  let lease = await publishUnderNewLease();
  let stopped = false;
  let renewing: Promise<void> = Promise.resolve();
  const renew = async (): Promise<void> => {
    try {
      await store.keepAlive(lease.id);
    } catch (error) {
      if (stopped) return;
      options.onTrouble?.(error as Error);
      if (error instanceof DiscoveryLeaseError) {
        try {
          lease = await publishUnderNewLease();
        } catch (republishError) {
          options.onTrouble?.(republishError as Error);
        }
      }
    }
  };
  const timer = setInterval(() => {
    // One renewal at a time; a slow store delays the next tick instead of piling calls up.
    renewing = renewing.then(() => (stopped ? undefined : renew()));
  }, renewEveryMs);
  timer.unref();

  return {
    get lease() {
      return lease;
    },
    async withdraw() {
      stopped = true;
      clearInterval(timer);
      await renewing;
      try {
        await store.commit(parts.map((part) => ({ type: 'delete', key: rankPartKey(part, part.parallel, options.keyPrefix) })));
      } catch (error) {
        // Revoking the lease withdraws the parts too; it is tried even so, and the first failure reported.
        await store.revokeLease(lease.id).catch(() => undefined);
        throw error;
      }
      await store.revokeLease(lease.id);
    },
  };
}
