import { Encoder } from '@msgpack/msgpack';

/** How the engine writes its payloads: as current vLLM (maps) or as older vLLM (positional arrays). */
export type EventEncoding = 'map' | 'array';
/** How it publishes block hashes: raw digests (vLLM's default), unsigned 64-bit (int hashes) or signed 64-bit (SGLang). */
export type HashForm = 'bytes' | 'uint64' | 'int64';

export interface StoredEvent {
  readonly type: 'BlockStored';
  readonly blockHashes: readonly Uint8Array[];
  readonly parentBlockHash: Uint8Array | null;
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly medium: string;
  readonly extraKeys?: readonly (readonly unknown[] | null)[];
}
export interface RemovedEvent {
  readonly type: 'BlockRemoved';
  readonly blockHashes: readonly Uint8Array[];
  readonly medium: string;
}
export type EngineEvent = StoredEvent | RemovedEvent | { readonly type: 'AllBlocksCleared' };

const encoder = new Encoder({ useBigInt64: true });

/** The digest's last 8 bytes, big-endian, as vLLM's VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES writes it (or signed). */
export function hashValue(digest: Uint8Array, form: HashForm): Uint8Array | bigint {
  if (form === 'bytes') return digest;
  const value = Buffer.from(digest.subarray(digest.length - 8)).readBigUInt64BE();
  return form === 'uint64' ? value : BigInt.asIntN(64, value);
}

function storedFields(event: StoredEvent, form: HashForm): [string, unknown][] {
  const fields: [string, unknown][] = [
    ['block_hashes', event.blockHashes.map((hash) => hashValue(hash, form))],
    ['parent_block_hash', event.parentBlockHash === null ? null : hashValue(event.parentBlockHash, form)],
    ['token_ids', event.tokenIds],
    ['block_size', event.blockSize],
    ['lora_id', null],
    ['medium', event.medium],
    ['lora_name', null],
  ];
  if (event.extraKeys !== undefined) fields.push(['extra_keys', event.extraKeys]);
  return fields;
}

function eventFields(event: EngineEvent, form: HashForm): [string, unknown][] {
  if (event.type === 'BlockStored') return storedFields(event, form);
  if (event.type === 'BlockRemoved')
    return [
      ['block_hashes', event.blockHashes.map((hash) => hashValue(hash, form))],
      ['medium', event.medium],
    ];
  return [];
}

/** One batch's msgpack payload, as vLLM's msgspec writes it in that encoding. */
export function encodeBatch(
  ts: number,
  events: readonly EngineEvent[],
  rank: number,
  encoding: EventEncoding,
  form: HashForm,
): Uint8Array {
  if (encoding === 'array') {
    return encoder.encode([
      ts,
      events.map((event) => [event.type, ...eventFields(event, form).map(([, value]) => value)]),
      rank,
    ]);
  }
  return encoder.encode({
    ts,
    events: events.map((event) => Object.fromEntries([['type', event.type], ...eventFields(event, form)])),
    data_parallel_rank: rank,
  });
}
