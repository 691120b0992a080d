// What one worker's batch changes in the retained table, change by change, and a worker's entry of a
// block as the table holds it, which the room check starts from.

/** One change of a batch to its worker's entries, in the batch's order; `tier`: 0 = GPU, 1 = host. */
export type TableChange =
  | { readonly type: 'store'; readonly tier: 0 | 1; readonly words: Int32Array; readonly expiry: number }
  | { readonly type: 'remove'; readonly tier: 0 | 1; readonly words: Int32Array }
  | { readonly type: 'clear'; readonly tier: 0 | 1 };

/**
 * A worker's entry of a block, as bits: `1 << tier` for each tier it retains it on (none without an
 * entry), and `heldShared` where another worker retains the block too (so that the entry is, or would
 * be, an overflow one).
 */
export type HeldBlock = number;
export const heldShared = 0b100;
