import { describeValue, messageOf } from '@kvreuse/errors';
import { Decoder } from '@msgpack/msgpack';
import { Reader, readBatch } from './batch-reader.js';
import type { BlockRemoved, BlockStored, EngineBlockHash, EngineEvent, EngineEventBatch } from './engine-event.js';
import { batchTsRule, isBatchTs } from './engine-event.js';
import { MalformedEngineEventError } from './errors.js';

/** Digest lengths an engine publishes as raw bytes: SHA-256 (32) and xxHash-128 (16). */
const digestLengths = new Set([16, 32]);
const minInt64 = -(1n << 63n);
const maxUint64 = (1n << 64n) - 1n;

const fail = (path: string, reason: string): never => {
  throw new MalformedEngineEventError(path, reason);
};

type Fields = (name: string, position: number) => unknown;

/** Reads a struct written either as a map (by name) or as a positional array (after the tag at 0). */
function fieldsOf(value: unknown): Fields {
  if (Array.isArray(value)) return (_name, position) => value[position];
  const record = value as Record<string, unknown>;
  return (name) => (Object.hasOwn(record, name) ? record[name] : undefined);
}

/**
 * Refuses the value at `field` of event `event` (`''` for the event itself), or of the batch when
 * `event` is undefined, element `element` of it if given. The path is put into words only here: a
 * batch read in full builds none.
 */
function failAt(event: number | undefined, field: string, reason: string, element?: number): never {
  const at = event === undefined ? field : `events[${event}]${field === '' ? '' : `.${field}`}`;
  return fail(element === undefined ? at : `${at}[${element}]`, reason);
}

/** A hash at `field` of event `event`, or at element `element` of the array there. */
function hashOf(value: unknown, event: number, field: string, element?: number): EngineBlockHash {
  if (typeof value === 'bigint' && value >= minInt64 && value <= maxUint64) return value;
  if (Number.isSafeInteger(value)) return BigInt(value as number);
  if (value instanceof Uint8Array && digestLengths.has(value.length)) return value;
  return failAt(event, field, hashRefusal(value), element);
}

function hashRefusal(value: unknown): string {
  if (typeof value === 'bigint') return 'a hash integer is a signed or unsigned 64-bit integer';
  if (value instanceof Uint8Array) return `a hash digest is 32 or 16 bytes, not ${value.length}`;
  return `a hash is an integer or bytes, not ${typeof value === 'number' ? value : typeof value}`;
}

function hashesOf(value: unknown, event: number): EngineBlockHash[] {
  if (!Array.isArray(value)) return failAt(event, 'block_hashes', 'block hashes are an array');
  return value.map((hash, i) => hashOf(hash, event, 'block_hashes', i));
}

function optional<T>(
  value: unknown,
  event: number | undefined,
  field: string,
  check: (value: unknown) => value is T,
  what: string,
): T | null {
  if (value === undefined || value === null) return null;
  return check(value) ? value : failAt(event, field, `${what} or nil`);
}

const isString = (value: unknown): value is string => typeof value === 'string';
const isWhole = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

function tokenIdsOf(value: unknown, event: number): number[] {
  if (!Array.isArray(value)) return failAt(event, 'token_ids', 'token ids are an array');
  for (let i = 0; i < value.length; i++)
    if (!isWhole(value[i])) failAt(event, 'token_ids', 'a token id is a whole number', i);
  return value as number[];
}

function extraKeysOf(value: unknown, event: number): (readonly unknown[] | null)[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) return failAt(event, 'extra_keys', 'extra keys are an array (one entry per block) or nil');
  value.forEach((keys, i) => {
    if (keys !== null && !Array.isArray(keys))
      failAt(event, 'extra_keys', "a block's extra keys are an array or nil", i);
  });
  return value as (unknown[] | null)[];
}

function blockStored(field: Fields, event: number): BlockStored {
  const blockSize = field('block_size', 4);
  if (!isWhole(blockSize) || blockSize < 1) failAt(event, 'block_size', 'a block size is a whole number ≥ 1');
  const parent = field('parent_block_hash', 2);
  return {
    type: 'BlockStored',
    blockHashes: hashesOf(field('block_hashes', 1), event),
    parentBlockHash: parent === undefined || parent === null ? null : hashOf(parent, event, 'parent_block_hash'),
    tokenIds: tokenIdsOf(field('token_ids', 3), event),
    blockSize: blockSize as number,
    loraId: optional(field('lora_id', 5), event, 'lora_id', isWhole, 'a LoRA id is a whole number'),
    medium: optional(field('medium', 6), event, 'medium', isString, 'a medium is a string'),
    loraName: optional(field('lora_name', 7), event, 'lora_name', isString, 'a LoRA name is a string'),
    extraKeys: extraKeysOf(field('extra_keys', 8), event),
    groupIdx: optional(field('group_idx', 9), event, 'group_idx', isWhole, 'a group index is a whole number'),
    kvCacheSpecKind: optional(
      field('kv_cache_spec_kind', 10),
      event,
      'kv_cache_spec_kind',
      isString,
      'a kind is a string',
    ),
    kvCacheSpecSlidingWindow: optional(
      field('kv_cache_spec_sliding_window', 11),
      event,
      'kv_cache_spec_sliding_window',
      isWhole,
      'a sliding window is a whole number',
    ),
  };
}

function blockRemoved(field: Fields, event: number): BlockRemoved {
  return {
    type: 'BlockRemoved',
    blockHashes: hashesOf(field('block_hashes', 1), event),
    medium: optional(field('medium', 2), event, 'medium', isString, 'a medium is a string'),
    groupIdx: optional(field('group_idx', 3), event, 'group_idx', isWhole, 'a group index is a whole number'),
  };
}

/** Event `event` of the batch, or its tag when the type is unknown (skipped). */
function eventOf(value: unknown, event: number): EngineEvent | string {
  const isMap = value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Uint8Array);
  if (!Array.isArray(value) && !isMap) return failAt(event, '', 'an event is a map or an array');
  const tag = Array.isArray(value) ? value[0] : (value as Record<string, unknown>)['type'];
  if (typeof tag !== 'string') return failAt(event, 'type', 'an event is tagged with its type name');
  const field = fieldsOf(value);
  switch (tag) {
    case 'BlockStored':
      return blockStored(field, event);
    case 'BlockRemoved':
      return blockRemoved(field, event);
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      return tag;
  }
}

function batchOf(value: unknown): EngineEventBatch {
  const isMap = value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Uint8Array);
  if (!Array.isArray(value) && !isMap) return fail('', 'a batch is [ts, events, rank] or a map of them');
  const record = value as Record<string, unknown>;
  const [ts, events, rank] = Array.isArray(value)
    ? value
    : [record['ts'], record['events'], record['data_parallel_rank'] ?? record['attn_dp_rank']];
  if (!isBatchTs(ts)) fail('ts', batchTsRule);
  if (!Array.isArray(events)) return fail('events', 'events are an array');
  const decoded: EngineEvent[] = [];
  const unknownEventTypes: string[] = [];
  events.forEach((event, i) => {
    const result = eventOf(event, i);
    if (typeof result === 'string') unknownEventTypes.push(result);
    else decoded.push(result);
  });
  return {
    ts,
    events: decoded,
    dataParallelRank: optional(rank, undefined, 'data_parallel_rank', isWhole, 'a rank is a whole number'),
    unknownEventTypes,
  };
}

export type DecodeResult =
  | { readonly ok: true; readonly batch: EngineEventBatch }
  | { readonly ok: false; readonly error: MalformedEngineEventError };

/**
 * Decodes a payload into generic values (`decoder`: 64-bit integers as bigint), then checks and reads
 * them as a batch, with the reason if it is not one: the path of every payload the fast reader
 * (batch-reader.ts) leaves to it, and the reference it is tested against.
 */
export function decodeGenerically(decoder: Decoder, payload: Uint8Array): DecodeResult {
  let value: unknown;
  try {
    value = decoder.decode(payload);
  } catch (error) {
    const reason = messageOf(error);
    return { ok: false, error: new MalformedEngineEventError('', `not msgpack: ${reason}`) };
  }
  try {
    return { ok: true, batch: batchOf(value) };
  } catch (error) {
    if (error instanceof MalformedEngineEventError) return { ok: false, error };
    throw error;
  }
}

/**
 * Decodes the msgpack payload of a vLLM or SGLang KV event batch, in either encoding (maps, as current
 * vLLM writes its events, or positional arrays, tag first, as older vLLM and SGLang's batches do);
 * unknown keys are ignored, defaulted fields read as null, and 64-bit integers stay exact. Never
 * throws: a payload that is not a batch comes back with the reason.
 */
export class EngineBatchDecoder {
  readonly #decoder = new Decoder({ useBigInt64: true });
  readonly #reader = new Reader(this.#decoder);

  decode(payload: Uint8Array): DecodeResult {
    if (!(payload instanceof Uint8Array)) {
      const error = new MalformedEngineEventError(
        '',
        `a payload is bytes (a Uint8Array), not ${describeValue(payload)}`,
      );
      return { ok: false, error };
    }
    const batch = readBatch(this.#reader, payload);
    return batch !== undefined ? { ok: true, batch } : decodeGenerically(this.#decoder, payload);
  }
}
