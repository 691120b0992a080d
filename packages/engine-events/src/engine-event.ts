/**
 * A block hash as an engine publishes it, kept exactly: an integer (vLLM's unsigned 64-bit form, often
 * above 2^63, or SGLang's signed 64-bit one, negative when its top bit is set) as a bigint, or the raw
 * digest (vLLM's default: 32 bytes of SHA-256, or 16 of xxHash) as bytes.
 */
export type EngineBlockHash = bigint | Uint8Array;

/** Blocks the engine now holds: a run of full blocks, each chained to the one before. */
export interface BlockStored {
  readonly type: 'BlockStored';
  readonly blockHashes: readonly EngineBlockHash[];
  /** The hash of the block before the first one; null at the start of a sequence. */
  readonly parentBlockHash: EngineBlockHash | null;
  /** The token ids of all the blocks, `blockSize` per block. */
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly loraId: number | null;
  /** Where the blocks are: `GPU`, `CPU` (SGLang: `CPU_PINNED`), `DISK`…; null is the GPU. */
  readonly medium: string | null;
  readonly loraName: string | null;
  /** One entry per block: the extra keys of its hash (LoRA name, multimodal hashes, cache salt), or null. */
  readonly extraKeys: readonly (readonly unknown[] | null)[] | null;
  /** The KV cache group (hybrid models have several); null is the only group. */
  readonly groupIdx: number | null;
  readonly kvCacheSpecKind: string | null;
  readonly kvCacheSpecSlidingWindow: number | null;
}

/** Blocks the engine no longer holds on `medium`. */
export interface BlockRemoved {
  readonly type: 'BlockRemoved';
  readonly blockHashes: readonly EngineBlockHash[];
  readonly medium: string | null;
  readonly groupIdx: number | null;
}

/** The engine dropped every block it held. */
export interface AllBlocksCleared {
  readonly type: 'AllBlocksCleared';
}

export type EngineEvent = BlockStored | BlockRemoved | AllBlocksCleared;

/** What a batch's `ts` must be, worded once for the decoder's refusal and the feed's. */
export const batchTsRule = 'ts is seconds since the Unix epoch, a finite number ≥ 0';

/** Whether `ts` is a batch's `ts` (`batchTsRule`): the subscriber's lag is read from it, and a negative or NaN one would pass for the engine's time. */
export function isBatchTs(ts: unknown): ts is number {
  return typeof ts === 'number' && Number.isFinite(ts) && ts >= 0;
}

/** One published payload: `[ts, events, data_parallel_rank]` (vLLM) or `[ts, events, attn_dp_rank]` (SGLang). */
export interface EngineEventBatch {
  /** Seconds since the Unix epoch, when the engine published the batch. */
  readonly ts: number;
  readonly events: readonly EngineEvent[];
  /** The data-parallel rank (SGLang's attention DP rank) that published it, when it says. */
  readonly dataParallelRank: number | null;
  /** The tags of events of a type this package does not know, skipped (newer engines add types). */
  readonly unknownEventTypes: readonly string[];
}
