// The interface a serving framework implements so that its source rank can grant pins on its KV blocks.

/** A granted pin as the framework sees it: the longest prefix of the requested chain it holds, in position order. */
export interface AdapterGrant {
  /** The framework's block index of each granted block; `length` is the granted count (0: nothing held). */
  readonly blocks: Uint32Array;
}

/** A block the framework evicted (its slot was reused for other content). */
export interface EvictedBlock {
  readonly block: number;
  readonly hash: bigint;
}

/**
 * What a serving framework implements for its source rank. A pinned block is never evicted,
 * overwritten, deregistered or handed back until its pin is released or cancelled. The source calls
 * `releasePin` or `cancelPin` once per granted pin, whichever way it ends (never both, never twice).
 */
export interface PinAdapter {
  /**
   * Pins the longest prefix of `hashes` (a prompt's block-hash chain, in position order) the framework
   * still holds with exactly those hashes. Grants nothing (an empty grant) when it holds none.
   */
  requestPin(pinId: string, hashes: readonly bigint[]): AdapterGrant | Promise<AdapterGrant>;
  /** Confirms the pin is still held; false when the framework no longer knows it. */
  renewPin(pinId: string): boolean | Promise<boolean>;
  /** The reader gave the pin back (or its lease lapsed): its blocks may be evicted again. */
  releasePin(pinId: string): void | Promise<void>;
  /**
   * The source takes the pin back without its reader: held past a shutdown's deadline, its engine gone, or
   * granted once new pins were refused (the grant is never sent).
   */
  cancelPin(pinId: string): void | Promise<void>;
  /** Calls `listener` with each batch of evicted blocks; returns the unsubscribe function. */
  onEvicted(listener: (evicted: readonly EvictedBlock[]) => void): () => void;
}
