import type { PairDescriptors } from './descriptor-writer.js';
import type { RankId } from './rank-id.js';
import type { IndexRange } from './shard.js';

/**
 * The descriptors of one rank pair, as parallel typed arrays of `count` entries: descriptor i copies
 * `length[i]` bytes from `sourceOffset[i]` of the source rank's bank `sourceBank[i]` to
 * `destinationOffset[i]` of the destination rank's bank `destinationBank[i]` (offsets from the bank start).
 */
export interface RankPairPlan extends PairDescriptors {
  readonly sourceRank: RankId;
  readonly destinationRank: RankId;
  /** The KV heads and layers (global indices) this pair carries. */
  readonly kvHeads: IndexRange;
  readonly layers: IndexRange;
  readonly bytes: bigint;
}

/** Explicit descriptors for one transfer, one list per rank pair (what `materialize` returns). */
export interface TransferPlan {
  readonly pairs: readonly RankPairPlan[];
  readonly totalBytes: bigint;
  readonly descriptorCount: number;
}

export interface PlanOptions {
  /** Merge descriptors that continue each other in both banks (default true). */
  readonly coalesce?: boolean;
}
