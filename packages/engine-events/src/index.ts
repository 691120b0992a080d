/**
 * Reads the KV cache events inference engines publish (vLLM and SGLang: ZMQ, msgpack, replay), hashes
 * blocks as vLLM does, and feeds what each engine worker holds into the retained inventory.
 *
 * @packageDocumentation
 * @module \@kvreuse/engine-events
 */
export * from './errors.js';
export type {
  AllBlocksCleared,
  BlockRemoved,
  BlockStored,
  EngineBlockHash,
  EngineEvent,
  EngineEventBatch,
} from './engine-event.js';
export { type DecodeResult, EngineBatchDecoder } from './decode-batch.js';
export { type CborValue, encodeCanonicalCbor } from './canonical-cbor.js';
export {
  hashVllmBlockChain,
  sha256Cbor,
  vllmBlockHashFunction,
  type VllmExtraKeys,
  type VllmHashChainOptions,
  vllmIntBlockHash,
  vllmNoneHash,
} from './vllm-block-hash.js';
export { engineHashKey } from './engine-hash-index.js';
export {
  EngineInventoryFeed,
  type EngineInventoryFeedOptions,
  type FeedOutcome,
  type SkipReason,
  skipReasons,
} from './engine-inventory-feed.js';
export {
  EngineEventSubscriber,
  type EngineRankSource,
  type EngineRanksOptions,
  type EngineSubscriberEvent,
  type EngineSubscriberMetrics,
  type EngineSubscriberOptions,
  maxEngineRanks,
  rankEndpoint,
  subscribeEngineRanks,
} from './engine-subscriber.js';
export { replayEndSeq } from './replay-client.js';
export { registerEngineEventMetrics } from './subscriber-metrics.js';
