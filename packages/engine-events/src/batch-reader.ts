// The fast path of EngineBatchDecoder: reads a well-formed event batch straight from its msgpack bytes
// into the batch, with no intermediate tree of generic values (a map per event, a BigInt per hash
// and the validation walk over both). Anything it does not expect — a malformed payload, a value of
// an unusual type, a non-ASCII string, extra keys — makes it give up (`undefined`): the generic
// decoder then decides, with the same answer or the reason it is malformed.
import { Decoder } from '@msgpack/msgpack';
import type { BlockRemoved, BlockStored, EngineBlockHash, EngineEvent, EngineEventBatch } from './engine-event.js';
import { isBatchTs } from './engine-event.js';

/** Thrown to give up; caught by `readBatch`. */
const giveUp: unique symbol = Symbol('not on the fast path');
const fail = (): never => {
  throw giveUp;
};

// Field ids of an event, and of a batch map.
const field = {
  type: 0,
  block_hashes: 1,
  parent_block_hash: 2,
  token_ids: 3,
  block_size: 4,
  lora_id: 5,
  medium: 6,
  lora_name: 7,
  extra_keys: 8,
  group_idx: 9,
  kv_cache_spec_kind: 10,
  kv_cache_spec_sliding_window: 11,
} as const;
/** The fields of a positional BlockRemoved, by position (BlockStored's positions are the field ids). */
const removedPositions = [field.type, field.block_hashes, field.medium, field.group_idx];
const batchField = { ts: 0, events: 1, data_parallel_rank: 2, attn_dp_rank: 3 } as const;

const ascii = (text: string): Uint8Array => Uint8Array.from(text, (c) => c.charCodeAt(0));
const namesOf = (ids: Record<string, number>): Uint8Array[] =>
  Object.entries(ids).reduce<Uint8Array[]>((names, [name, id]) => ((names[id] = ascii(name)), names), []);
const eventNames = namesOf(field);
const batchNames = namesOf(batchField);
/** Strings that come back in every batch, returned without decoding. */
const commonStrings = ['BlockStored', 'BlockRemoved', 'AllBlocksCleared', 'GPU', 'CPU', 'CPU_PINNED', 'DISK'];
const commonBytes = commonStrings.map(ascii);

/** An event's fields as read; `undefined` when absent, as the generic decoder has them. */
class EventFields {
  type: string | undefined;
  blockHashes: EngineBlockHash[] | undefined;
  parent: EngineBlockHash | null | undefined;
  tokenIds: number[] | undefined;
  blockSize: number | null | undefined;
  loraId: number | null | undefined;
  medium: string | null | undefined;
  loraName: string | null | undefined;
  extraKeys: (readonly unknown[] | null)[] | null | undefined;
  groupIdx: number | null | undefined;
  kind: string | null | undefined;
  window: number | null | undefined;
}

/** A cursor over one payload; `extraKeys` decodes with `generic`. */
export class Reader {
  bytes: Uint8Array = new Uint8Array(0);
  view: DataView = new DataView(this.bytes.buffer);
  pos = 0;

  constructor(private readonly generic: Decoder) {}

  reset(payload: Uint8Array): void {
    this.bytes = payload;
    this.view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    this.pos = 0;
  }

  #take(count: number): number {
    const at = this.pos;
    if (at + count > this.bytes.length) fail();
    this.pos = at + count;
    return at;
  }

  byte(): number {
    return this.bytes[this.#take(1)]!;
  }

  /** An array header's length, or −1 (nothing read) if the next value is not an array. */
  arrayLength(): number {
    return this.#length(0x90, 0xdc);
  }

  /** A map header's length, or −1 (nothing read) if the next value is not a map. */
  mapLength(): number {
    return this.#length(0x80, 0xde);
  }

  /** A container header's length: fix types from `fix` (up to 15 entries), 16- and 32-bit ones at `wide` and `wide + 1`. */
  #length(fix: number, wide: number): number {
    const type = this.bytes[this.pos];
    if (type === undefined) return fail();
    if (type >= fix && type <= fix + 0x0f) return this.byte() & 0x0f;
    if (type === wide) return (this.byte(), this.view.getUint16(this.#take(2)));
    if (type === wide + 1) return (this.byte(), this.view.getUint32(this.#take(4)));
    return -1;
  }

  nil(): boolean {
    if (this.bytes[this.pos] !== 0xc0) return false;
    this.pos += 1;
    return true;
  }

  /** A whole number up to 2^32 − 1 (what the generic decoder reads as a non-negative number). */
  whole(): number {
    const type = this.byte();
    if (type < 0x80) return type;
    if (type === 0xcc) return this.bytes[this.#take(1)]!;
    if (type === 0xcd) return this.view.getUint16(this.#take(2));
    if (type === 0xce) return this.view.getUint32(this.#take(4));
    return fail();
  }

  wholeOrNil(): number | null {
    return this.nil() ? null : this.whole();
  }

  /** A number (ts): an integer or a float, as the generic decoder has it. */
  number(): number {
    const type = this.bytes[this.pos];
    if (type === 0xcb) return (this.byte(), this.view.getFloat64(this.#take(8)));
    if (type === 0xca) return (this.byte(), this.view.getFloat32(this.#take(4)));
    return this.whole();
  }

  /** The bytes of a string, as [start, end), or fails if the next value is not one. */
  #stringBytes(): number {
    const type = this.byte();
    let length: number;
    if (type >= 0xa0 && type <= 0xbf) length = type & 0x1f;
    else if (type === 0xd9) length = this.bytes[this.#take(1)]!;
    else if (type === 0xda) length = this.view.getUint16(this.#take(2));
    else return fail();
    return this.#take(length);
  }

  /** Which of `names` the next value (a string) is, or −1. */
  name(names: readonly Uint8Array[]): number {
    const start = this.#stringBytes();
    const length = this.pos - start;
    const bytes = this.bytes;
    for (let id = 0; id < names.length; id++) {
      const name = names[id]!;
      if (name.length !== length) continue;
      let i = 0;
      while (i < length && bytes[start + i] === name[i]) i++;
      if (i === length) return id;
    }
    return -1;
  }

  /** An ASCII string (a common one without decoding); anything else fails. */
  string(): string {
    const start = this.pos;
    const common = this.name(commonBytes);
    if (common >= 0) return commonStrings[common]!;
    this.pos = start;
    const from = this.#stringBytes();
    let text = '';
    for (let i = from; i < this.pos; i++) {
      const code = this.bytes[i]!;
      if (code >= 0x80) fail();
      text += String.fromCharCode(code);
    }
    return text;
  }

  stringOrNil(): string | null {
    return this.nil() ? null : this.string();
  }

  /** A block hash: an integer of up to 64 bits as a bigint, or a 16- or 32-byte digest. */
  hash(): EngineBlockHash {
    const type = this.byte();
    if (type === 0xcf) return this.view.getBigUint64(this.#take(8));
    if (type === 0xd3) return this.view.getBigInt64(this.#take(8));
    if (type < 0x80) return BigInt(type);
    if (type >= 0xe0) return BigInt(type - 0x100);
    if (type === 0xc4 || type === 0xc5) {
      const length = type === 0xc4 ? this.bytes[this.#take(1)]! : this.view.getUint16(this.#take(2));
      if (length !== 32 && length !== 16) fail();
      const at = this.#take(length);
      return this.bytes.subarray(at, at + length);
    }
    this.pos -= 1;
    if (type === 0xd0 || type === 0xd1 || type === 0xd2) return BigInt(this.#signed32(type));
    return BigInt(this.whole());
  }

  #signed32(type: number): number {
    this.pos += 1;
    if (type === 0xd0) return this.view.getInt8(this.#take(1));
    if (type === 0xd1) return this.view.getInt16(this.#take(2));
    return this.view.getInt32(this.#take(4));
  }

  hashOrNil(): EngineBlockHash | null {
    return this.nil() ? null : this.hash();
  }

  hashes(): EngineBlockHash[] {
    const count = this.arrayLength();
    if (count < 0) fail();
    const hashes: EngineBlockHash[] = [];
    for (let i = 0; i < count; i++) hashes.push(this.hash());
    return hashes;
  }

  /** An array of whole numbers up to 2^32 − 1: the hot loop (16 or more a block), so without the helpers. */
  tokenIds(): number[] {
    const count = this.arrayLength();
    if (count < 0) fail();
    const bytes = this.bytes;
    const end = bytes.length;
    let at = this.pos;
    if (count > end - at) fail(); // a byte at least each: a count no payload holds allocates nothing
    const ids = new Array<number>(count); // filled below, so never read with holes
    for (let i = 0; i < count; i++) {
      const type = bytes[at];
      if (type === undefined) return fail();
      if (type < 0x80) {
        ids[i] = type;
        at += 1;
      } else if (type === 0xce && at + 5 <= end) {
        ids[i] = ((bytes[at + 1]! << 24) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 8) | bytes[at + 4]!) >>> 0;
        at += 5;
      } else if (type === 0xcd && at + 3 <= end) {
        ids[i] = (bytes[at + 1]! << 8) | bytes[at + 2]!;
        at += 3;
      } else if (type === 0xcc && at + 2 <= end) {
        ids[i] = bytes[at + 1]!;
        at += 2;
      } else return fail();
    }
    this.pos = at;
    return ids;
  }

  /** Extra keys (rare): nil, or an array of nil or arrays, decoded by the generic decoder. */
  extraKeys(): (readonly unknown[] | null)[] | null {
    if (this.nil()) return null;
    const start = this.pos;
    this.skip();
    let value: unknown;
    try {
      value = this.generic.decode(this.bytes.subarray(start, this.pos));
    } catch {
      // Bytes `skip` passes over that are no value (0xc1, a map with an array key): the generic path says why.
      return fail();
    }
    if (!Array.isArray(value) || !value.every((keys) => keys === null || Array.isArray(keys))) fail();
    return value as (unknown[] | null)[];
  }

  /** Passes over the next value, whatever it is. */
  skip(): void {
    for (let pending = 1; pending > 0; pending--) {
      const type = this.byte();
      if (type < 0x80 || type >= 0xe0 || (type >= 0xc0 && type <= 0xc3)) continue;
      if (type <= 0x8f) pending += 2 * (type & 0x0f);
      else if (type <= 0x9f) pending += type & 0x0f;
      else if (type <= 0xbf) this.#take(type & 0x1f);
      else pending += this.#skipSized(type);
    }
  }

  /** Skips a value of type 0xc1–0xdf past its type byte; returns how many values it contains. */
  #skipSized(type: number): number {
    if (type >= 0xca && type <= 0xd8) {
      this.#take(fixedSizes[type - 0xca]!);
      return 0;
    }
    const width = sizeWidths[type];
    if (width === undefined) return fail();
    const size =
      width === 1
        ? this.bytes[this.#take(1)]!
        : width === 2
          ? this.view.getUint16(this.#take(2))
          : this.view.getUint32(this.#take(4));
    if (type >= 0xdc) return type >= 0xde ? 2 * size : size;
    this.#take(size + (type >= 0xc7 && type <= 0xc9 ? 1 : 0)); // an ext's type byte
    return 0;
  }
}

/** Bytes after the type byte of 0xca (float32) to 0xd8 (fixext16). */
const fixedSizes = [4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 2, 3, 5, 9, 17];
/** Bytes of the size (or count) after the type byte: bin, ext, str, array and map headers. */
const sizeWidths: Partial<Record<number, 1 | 2 | 4>> = {
  0xc4: 1,
  0xc5: 2,
  0xc6: 4,
  0xc7: 1,
  0xc8: 2,
  0xc9: 4,
  0xd9: 1,
  0xda: 2,
  0xdb: 4,
  0xdc: 2,
  0xdd: 4,
  0xde: 2,
  0xdf: 4,
};

/** Reads field `id` of an event into `fields`. */
function readField(reader: Reader, fields: EventFields, id: number): void {
  switch (id) {
    case field.type:
      fields.type = reader.string();
      return;
    case field.block_hashes:
      fields.blockHashes = reader.hashes();
      return;
    case field.parent_block_hash:
      fields.parent = reader.hashOrNil();
      return;
    case field.token_ids:
      fields.tokenIds = reader.tokenIds();
      return;
    case field.block_size:
      fields.blockSize = reader.wholeOrNil();
      return;
    case field.lora_id:
      fields.loraId = reader.wholeOrNil();
      return;
    case field.medium:
      fields.medium = reader.stringOrNil();
      return;
    case field.lora_name:
      fields.loraName = reader.stringOrNil();
      return;
    case field.extra_keys:
      fields.extraKeys = reader.extraKeys();
      return;
    case field.group_idx:
      fields.groupIdx = reader.wholeOrNil();
      return;
    case field.kv_cache_spec_kind:
      fields.kind = reader.stringOrNil();
      return;
    case field.kv_cache_spec_sliding_window:
      fields.window = reader.wholeOrNil();
      return;
    default:
      reader.skip();
  }
}

/** One event (a map, or a positional array with its tag first), or its tag when its type is unknown. */
function readEvent(reader: Reader): EngineEvent | string {
  const fields = new EventFields();
  let count = reader.mapLength();
  if (count >= 0) {
    for (; count > 0; count--) readField(reader, fields, reader.name(eventNames));
  } else {
    count = reader.arrayLength();
    if (count < 1) fail();
    fields.type = reader.string();
    const positions =
      fields.type === 'BlockRemoved' ? removedPositions : fields.type === 'BlockStored' ? undefined : [];
    for (let position = 1; position < count; position++)
      readField(reader, fields, positions ? (positions[position] ?? -1) : position);
  }
  return eventOf(fields);
}

function eventOf(fields: EventFields): EngineEvent | string {
  switch (fields.type) {
    case undefined:
      return fail();
    case 'BlockStored':
      if (fields.blockHashes === undefined || fields.tokenIds === undefined) return fail();
      if (fields.blockSize === undefined || fields.blockSize === null || fields.blockSize < 1) return fail();
      return {
        type: 'BlockStored',
        blockHashes: fields.blockHashes,
        parentBlockHash: fields.parent ?? null,
        tokenIds: fields.tokenIds,
        blockSize: fields.blockSize,
        loraId: fields.loraId ?? null,
        medium: fields.medium ?? null,
        loraName: fields.loraName ?? null,
        extraKeys: fields.extraKeys ?? null,
        groupIdx: fields.groupIdx ?? null,
        kvCacheSpecKind: fields.kind ?? null,
        kvCacheSpecSlidingWindow: fields.window ?? null,
      } satisfies BlockStored;
    case 'BlockRemoved':
      if (fields.blockHashes === undefined) return fail();
      return {
        type: 'BlockRemoved',
        blockHashes: fields.blockHashes,
        medium: fields.medium ?? null,
        groupIdx: fields.groupIdx ?? null,
      } satisfies BlockRemoved;
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      return fields.type;
  }
}

function readEvents(reader: Reader): { events: EngineEvent[]; unknownEventTypes: string[] } {
  const count = reader.arrayLength();
  if (count < 0) fail();
  const events: EngineEvent[] = [];
  const unknownEventTypes: string[] = [];
  for (let i = 0; i < count; i++) {
    const event = readEvent(reader);
    if (typeof event === 'string') unknownEventTypes.push(event);
    else events.push(event);
  }
  return { events, unknownEventTypes };
}

/**
 * The batch in `payload` when it is a well-formed batch of the usual kind, read without a generic
 * decode; undefined when the generic decoder must decide (anything unusual or malformed).
 */
export function readBatch(reader: Reader, payload: Uint8Array): EngineEventBatch | undefined {
  reader.reset(payload);
  try {
    let ts: number | undefined;
    let read: { events: EngineEvent[]; unknownEventTypes: string[] } | undefined;
    let rank: number | null = null;
    let count = reader.arrayLength();
    if (count >= 0) {
      // [ts, events] or [ts, events, rank], anything after ignored
      if (count < 2) return undefined;
      ts = reader.number();
      read = readEvents(reader);
      if (count > 2) rank = reader.wholeOrNil();
      for (; count > 3; count--) reader.skip();
    } else {
      count = reader.mapLength();
      let sglangRank: number | null = null;
      for (; count > 0; count--) {
        const id = reader.name(batchNames);
        if (id === batchField.ts) ts = reader.number();
        else if (id === batchField.events) read = readEvents(reader);
        else if (id === batchField.data_parallel_rank) rank = reader.wholeOrNil();
        else if (id === batchField.attn_dp_rank) sglangRank = reader.wholeOrNil();
        else reader.skip();
      }
      rank ??= sglangRank;
    }
    if (!isBatchTs(ts) || read === undefined || reader.pos !== payload.length) return undefined;
    return { ts, events: read.events, dataParallelRank: rank, unknownEventTypes: read.unknownEventTypes };
  } catch (error) {
    if (error === giveUp) return undefined;
    throw error;
  }
}
