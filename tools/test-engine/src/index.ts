export { blockHash, noneHash, sha256Cbor } from './block-hash.js';
export { type EngineEvent, encodeBatch, type EventEncoding, type HashForm, hashValue } from './encode-events.js';
export { TestEngine, type TestEngineOptions } from './test-engine.js';
