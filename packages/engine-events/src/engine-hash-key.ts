import type { EngineBlockHash } from './engine-event.js';

/**
 * The key an engine hash is indexed under: an integer as its 64 bits (so SGLang's signed form and the
 * unsigned form of the same bits meet), a digest as lowercase hex.
 */
export type EngineHashKey = bigint | string;

export function engineHashKey(hash: EngineBlockHash): EngineHashKey {
  return typeof hash === 'bigint'
    ? BigInt.asUintN(64, hash)
    : Buffer.from(hash.buffer, hash.byteOffset, hash.length).toString('hex');
}
