import { readFileSync } from 'node:fs';
import { Decoder, Encoder } from '@msgpack/msgpack';
import { describe, expect, it } from 'vitest';
import { Reader, readBatch } from './batch-reader.js';
import { decodeGenerically, EngineBatchDecoder } from './decode-batch.js';

const decoder = new Decoder({ useBigInt64: true });
const reader = new Reader(decoder);
const encoder = new Encoder({ useBigInt64: true });
const bytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex, 'hex'));

/** What the generic path makes of a payload that is a batch. */
function generic(payload: Uint8Array) {
  const result = decodeGenerically(decoder, payload);
  if (!result.ok) throw result.error;
  return result.batch;
}

let state = 0x1234567;
const random32 = (): number => {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return state >>> 0;
};
const pick = <T>(choices: readonly T[]): T => choices[random32() % choices.length]!;

/** A hash in one of the forms engines publish: vLLM's uint64 (often above 2^63), SGLang's int64, a small integer, a digest. */
function randomHash(): unknown {
  const bits = (BigInt(random32()) << 32n) | BigInt(random32());
  return pick([
    () => bits | (1n << 63n),
    () => BigInt.asIntN(64, bits | (1n << 63n)),
    () => random32() % 300,
    () => -(random32() % 200) - 1,
    () => new Uint8Array(32).map(() => random32() & 0xff),
    () => new Uint8Array(16).map(() => random32() & 0xff),
  ])();
}

const unknownValues: unknown[] = [
  { nested: [1, 'x', null, { deep: true }] },
  [1.5, -7, 2 ** 40, 'é', new Uint8Array(70_000)],
  'x'.repeat(300),
  -(2n ** 40n),
  false,
];
const storedKeys = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name'];
const storedDefaulted = ['extra_keys', 'group_idx', 'kv_cache_spec_kind', 'kv_cache_spec_sliding_window'];

/** A usual event, as a map (current vLLM) or a positional array (older vLLM, SGLang), sometimes with what newer engines add. */
function randomEvent(positional: boolean): unknown {
  const type = pick(['BlockStored', 'BlockStored', 'BlockRemoved', 'AllBlocksCleared', 'BlockPinned']);
  const blocks = random32() % 20;
  const fields: Record<string, unknown> = {
    block_hashes: Array.from({ length: blocks }, randomHash),
    parent_block_hash: pick([null, randomHash()]),
    token_ids: Array.from({ length: blocks * 16 }, () => pick([random32() % 151_936, random32(), random32() % 100])),
    block_size: pick([16, 1, 256]),
    lora_id: pick([null, 3]),
    medium: pick([null, 'GPU', 'CPU', 'CPU_PINNED', 'NVMe']),
    lora_name: pick([null, 'adapter-1']),
    extra_keys: pick([null, Array.from({ length: blocks }, () => pick([null, ['lora', 7n, ['mm', 1.5]]]))]),
    group_idx: pick([0, 1, null]),
    kv_cache_spec_kind: pick([null, 'full_attention']),
    kv_cache_spec_sliding_window: pick([null, 4096]),
  };
  const keys =
    type === 'BlockStored'
      ? [...storedKeys, ...storedDefaulted.slice(0, random32() % 5)]
      : type === 'BlockRemoved'
        ? ['block_hashes', 'medium', 'group_idx'].slice(0, 2 + (random32() % 2))
        : [];
  // Positions a reader does not know come after those it knows.
  const complete = type === 'BlockStored' ? keys.length === 11 : type !== 'BlockRemoved' || keys.length === 3;
  const more = complete && random32() % 4 === 0 ? [pick(unknownValues)] : [];
  if (positional) return [type, ...keys.map((key) => fields[key]), ...more];
  const event: Record<string, unknown> = { type };
  for (const key of keys) event[key] = fields[key];
  if (random32() % 4 === 0) event['future_key'] = pick(unknownValues);
  return event;
}

/** A usual batch: `[ts, events, rank]` (or without the rank, or with more after it), or a map of them. */
function randomBatch(): Uint8Array {
  const positional = random32() % 2 === 0;
  const events = Array.from({ length: random32() % 6 }, () => randomEvent(positional));
  const ts = pick([1_750_000_000.25, 1_750_000_000, 0.5]);
  const rank = pick([null, 0, 7, 300]);
  if (random32() % 2 === 0)
    return encoder.encode([ts, events, rank, ...(random32() % 3 === 0 ? ['extra'] : [])].slice(0, pick([2, 3, 4])));
  const map: Record<string, unknown> = { ts, events };
  map[pick(['data_parallel_rank', 'attn_dp_rank'])] = rank;
  if (random32() % 3 === 0) map['future_key'] = pick(unknownValues);
  return encoder.encode(map);
}

describe('readBatch, the fast path of EngineBatchDecoder', () => {
  it('reads the recorded vLLM and SGLang streams, as the generic path does', () => {
    const streams = JSON.parse(
      readFileSync(new URL('../test-data/event-streams.json', import.meta.url), 'utf8'),
    ) as Record<string, { frames: [string, string, string] }[]>;
    for (const name of ['vllmMap', 'vllmArray', 'sglang']) {
      for (const { frames } of streams[name]!) {
        const payload = bytes(frames[2]);
        expect(readBatch(reader, payload), name).toEqual(generic(payload));
      }
    }
  });

  it('reads every usual batch, in either encoding, exactly as the generic path does', () => {
    for (let i = 0; i < 1_000; i++) {
      const payload = randomBatch();
      const fast = readBatch(reader, payload);
      expect(fast).toBeDefined();
      expect(fast).toEqual(generic(payload));
    }
  });

  it('leaves what is unusual to the generic path, which reads it', () => {
    const floats = new Encoder({ forceIntegerToFloat: true });
    const unusual = [
      floats.encode({ ts: 1, events: [['BlockRemoved', [5], 'GPU']] }), // a hash written as a float
      { ts: 1, events: [{ type: 'BlockRemoved', block_hashes: [1], medium: 'GPÜ' }] }, // not ASCII
      { ts: 1n, events: [] }, // ts as an int64
      [1, [], 'a rank that is not one'], // malformed: the generic path names why
    ].map((value) => (value instanceof Uint8Array ? value : encoder.encode(value)));
    // [1.0, [['BlockStored', [1], nil, [5 as an int8], 1]], nil]
    const int8TokenId = bytes(
      '93' + 'cb3ff0000000000000' + '9195' + 'ab426c6f636b53746f726564' + '9101c0' + '91d005' + '01c0',
    );
    for (const payload of [...unusual, int8TokenId]) {
      expect(readBatch(reader, payload)).toBeUndefined();
      expect(new EngineBatchDecoder().decode(payload)).toEqual(decodeGenerically(decoder, payload));
    }
    expect(new EngineBatchDecoder().decode(int8TokenId)).toMatchObject({
      ok: true,
      batch: { events: [{ tokenIds: [5] }] },
    });
  });

  it('gives up on every truncation of a batch, never reading past its end', () => {
    const engineDecoder = new EngineBatchDecoder();
    // [1, [['BlockStored', [1], nil, <an array of 2^32 − 1 token ids>: the payload ends there
    const claimsTooMuch = bytes('930191' + '95ab426c6f636b53746f726564' + '9101c0' + 'ddffffffff');
    expect(readBatch(reader, claimsTooMuch)).toBeUndefined();
    expect(engineDecoder.decode(claimsTooMuch).ok).toBe(false);
    for (let tried = 0; tried < 30;) {
      const payload = randomBatch();
      if (payload.length > 2_000) continue; // its truncations are many, and alike
      tried++;
      for (let end = 0; end < payload.length; end++) {
        expect(readBatch(reader, payload.subarray(0, end))).toBeUndefined();
        expect(engineDecoder.decode(payload.slice(0, end)).ok).toBe(false);
      }
      const longer = new Uint8Array(payload.length + 1);
      longer.set(payload);
      expect(readBatch(reader, longer)).toBeUndefined();
    }
  });
});
