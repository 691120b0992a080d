import { retentionTiers } from '@kvreuse/registry';
/**
 * Replays a batch's events in order on an empty view, as a follower that joins late does, and counts
 * the blocks of each tier that have not expired at `now` (milliseconds since the Unix epoch).
 */
export function summarizeInventoryBatch(batch, now) {
    const held = new Map(retentionTiers.map((tier) => [tier, new Map()]));
    for (const event of batch.events) {
        const tier = held.get(event.tier);
        if (event.type === 'cleared')
            tier.clear();
        else if (event.type === 'removed')
            for (const hash of event.blocks)
                tier.delete(hash);
        else
            for (const hash of event.blocks)
                tier.set(hash, event.expiresAt);
    }
    const live = (tier) => [...held.get(tier).values()].filter((expiresAt) => expiresAt > now).length;
    const blocks = Object.fromEntries(retentionTiers.map((tier) => [tier, live(tier)]));
    return { workerId: batch.workerId, incarnation: batch.incarnation, epoch: batch.epoch, seq: batch.seq, blocks };
}
