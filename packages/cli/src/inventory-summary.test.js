import { describe, expect, it } from 'vitest';
import { summarizeInventoryBatch } from './inventory-summary.js';
describe('summarizeInventoryBatch', () => {
    const batch = { workerId: 'decode-0', incarnation: 'inc-1', epoch: 4, seq: 7 };
    it('replays stored, removed and cleared in order, per tier', () => {
        const summary = summarizeInventoryBatch({
            ...batch,
            events: [
                { type: 'stored', tier: 'gpu', blocks: [1n, 2n, 3n], expiresAt: 2_000_000_000_000 },
                { type: 'stored', tier: 'host', blocks: [3n, 4n], expiresAt: 2_000_000_000_000 },
                { type: 'removed', tier: 'gpu', blocks: [2n] },
                { type: 'cleared', tier: 'host' },
                { type: 'stored', tier: 'host', blocks: [9n], expiresAt: 2_000_000_000_000 },
            ],
        }, 1_900_000_000_000);
        expect(summary).toEqual({ ...batch, blocks: { gpu: 2, host: 1 } });
    });
    it('does not count what has expired by now', () => {
        const summary = summarizeInventoryBatch({
            ...batch,
            events: [
                { type: 'stored', tier: 'gpu', blocks: [1n], expiresAt: 1_000_000_000_000 },
                { type: 'stored', tier: 'gpu', blocks: [2n], expiresAt: 3_000_000_000_000 },
            ],
        }, 2_000_000_000_000);
        expect(summary.blocks).toEqual({ gpu: 1, host: 0 });
    });
});
