import { type InventoryBatch, type RetentionTier, retentionTiers } from '@kvreuse/inventory';

/** What one worker's latest inventory batch says it retains now, per tier. */
export interface InventorySummary {
  readonly workerId: string;
  readonly incarnation: string;
  readonly epoch: number;
  readonly seq: number;
  /** Blocks retained per tier, not yet expired at `now`. */
  readonly blocks: Readonly<Record<RetentionTier, number>>;
}

/**
 * Replays a batch's events in order on an empty view, as a follower that joins late does, and counts
 * the blocks of each tier that have not expired at `now` (milliseconds since the Unix epoch).
 */
export function summarizeInventoryBatch(batch: InventoryBatch, now: number): InventorySummary {
  const held = new Map<RetentionTier, Map<bigint, number>>(retentionTiers.map((tier) => [tier, new Map()]));
  for (const event of batch.events) {
    const tier = held.get(event.tier)!;
    if (event.type === 'cleared') tier.clear();
    else if (event.type === 'removed') for (const hash of event.blocks) tier.delete(hash);
    else for (const hash of event.blocks) tier.set(hash, event.expiresAt);
  }
  const live = (tier: RetentionTier): number =>
    [...held.get(tier)!.values()].filter((expiresAt) => expiresAt > now).length;
  const blocks = Object.fromEntries(retentionTiers.map((tier) => [tier, live(tier)])) as Record<RetentionTier, number>;
  return { workerId: batch.workerId, incarnation: batch.incarnation, epoch: batch.epoch, seq: batch.seq, blocks };
}
