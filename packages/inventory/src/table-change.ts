// What one worker's batch changes in the retained table, change by change, and a worker's entry of a
// block as the table holds it, which the room check starts from.

/** One change of a batch to its worker's entries, in the batch's order; `tier`: 0 = GPU, 1 = host. */
export type TableChange =
  | { readonly type: 'store'; readonly tier: 0 | 1; readonly words: Int32Array; readonly expiry: number }
  | { readonly type: 'remove'; readonly tier: 0 | 1; readonly words: Int32Array }
  | { readonly type: 'clear'; readonly tier: 0 | 1 };

/**
 * A worker's entry of a block: the tiers it retains it on (bit `1 << tier` each; 0 without an entry),
 * and whether another worker retains the block too (so that the entry is, or would be, an overflow one).
 */
export interface HeldBlock {
  readonly tiers: number;
  readonly shared: boolean;
}
