// The frames in ../test-data/event-streams.json were written by ../test-data/generate.py with Debian's
// python3-msgpack 1.0.3 the way msgspec writes vLLM's and SGLang's structs (see its header), and carry
// what each payload must decode to. The suite reads only the JSON.
import { readFileSync } from 'node:fs';
import { codeOf } from '@kvreuse/errors';
import { describe, expect, it } from 'vitest';
import { EngineBatchDecoder } from './decode-batch.js';
import type { EngineBlockHash, EngineEvent } from './engine-event.js';

interface Recorded {
  frames: [string, string, string];
  ts: number;
  rank: number | null;
  events: Record<string, unknown>[];
}
interface Streams {
  intHashesAbove2To63: string[];
  vllmMap: Recorded[];
  vllmArray: Recorded[];
  sglang: Recorded[];
  malformed: { reason: string; payload: string }[];
}

const streams = JSON.parse(
  readFileSync(new URL('../test-data/event-streams.json', import.meta.url), 'utf8'),
) as Streams;
const bytes = (hex: string): Uint8Array => new Uint8Array(Buffer.from(hex, 'hex'));
const hashJson = (hash: EngineBlockHash): string =>
  typeof hash === 'bigint' ? hash.toString() : `hex:${Buffer.from(hash).toString('hex')}`;

/** An event as generate.py writes its expectation (hashes as decimal or `hex:` strings). */
function asJson(event: EngineEvent): Record<string, unknown> {
  if (event.type === 'AllBlocksCleared') return { type: event.type };
  const common = {
    type: event.type,
    blockHashes: event.blockHashes.map(hashJson),
    medium: event.medium,
    groupIdx: event.groupIdx,
  };
  if (event.type === 'BlockRemoved') return common;
  return {
    ...common,
    parentBlockHash: event.parentBlockHash === null ? null : hashJson(event.parentBlockHash),
    tokenIds: event.tokenIds,
    blockSize: event.blockSize,
    loraId: event.loraId,
    loraName: event.loraName,
    extraKeys: event.extraKeys,
    kvCacheSpecKind: event.kvCacheSpecKind,
    kvCacheSpecSlidingWindow: event.kvCacheSpecSlidingWindow,
  };
}

describe('EngineBatchDecoder on recorded streams', () => {
  const decoder = new EngineBatchDecoder();
  for (const [name, recorded] of [
    ['vLLM maps', streams.vllmMap],
    ['vLLM positional arrays', streams.vllmArray],
    ['SGLang', streams.sglang],
  ] as const) {
    it(`decodes every field of ${name}`, () => {
      for (const { frames, ts, rank, events } of recorded) {
        const result = decoder.decode(bytes(frames[2]));
        if (!result.ok) throw result.error;
        expect(result.batch.ts).toBe(ts);
        expect(result.batch.dataParallelRank).toBe(rank);
        expect(result.batch.events.map(asJson)).toEqual(events);
        expect(result.batch.unknownEventTypes).toEqual([]);
      }
    });
  }

  it('keeps hashes above 2^63 and signed hashes exact', () => {
    const map = decoder.decode(bytes(streams.vllmMap[1]!.frames[2]));
    const sglang = decoder.decode(bytes(streams.sglang[0]!.frames[2]));
    if (!map.ok || !sglang.ok) throw new Error('recorded batches decode');
    const stored = map.batch.events[0]!;
    const signed = sglang.batch.events[0]!;
    if (stored.type !== 'BlockStored' || signed.type !== 'BlockStored') throw new Error('first events are stores');
    expect(streams.intHashesAbove2To63.length).toBeGreaterThan(0);
    for (const above of streams.intHashesAbove2To63) expect(stored.blockHashes).toContain(BigInt(above));
    expect(signed.blockHashes.map((hash) => BigInt.asUintN(64, hash as bigint))).toEqual(stored.blockHashes);
    expect(signed.blockHashes.some((hash) => (hash as bigint) < 0n)).toBe(true);
  });

  it('reads the batch as a map with SGLang rank name and skips unknown event types and keys', async () => {
    const { Encoder } = await import('@msgpack/msgpack');
    const payload = new Encoder().encode({
      ts: 2.5,
      attn_dp_rank: 3,
      events: [{ type: 'BlockRemoved', block_hashes: [7], medium: 'GPU', future_key: 1 }, ['BlockPinned', [1]]],
    });
    const result = decoder.decode(payload);
    if (!result.ok) throw result.error;
    expect(result.batch).toEqual({
      ts: 2.5,
      dataParallelRank: 3,
      events: [{ type: 'BlockRemoved', blockHashes: [7n], medium: 'GPU', groupIdx: null }],
      unknownEventTypes: ['BlockPinned'],
    });
  });

  it('reports every malformed payload with its reason and never throws', () => {
    const reasons = streams.malformed.map(({ reason, payload }) => {
      const result = decoder.decode(bytes(payload));
      expect(result.ok, reason).toBe(false);
      if (result.ok) return '';
      expect(codeOf(result.error)).toBe('ENGINE_EVENTS_MALFORMED');
      return result.error.message;
    });
    expect(reasons).toEqual([
      expect.stringMatching(/not msgpack/),
      expect.stringMatching(/not msgpack/),
      expect.stringMatching(/a batch is/),
      expect.stringMatching(/at events: events are an array/),
      expect.stringMatching(/block_hashes: block hashes are an array/),
      expect.stringMatching(/block_hashes\[0\]: a hash is an integer or bytes, not 1.5/),
      expect.stringMatching(/a hash digest is 32 or 16 bytes, not 5/),
      expect.stringMatching(/token_ids\[0\]: a token id is a whole number/),
      expect.stringMatching(/not msgpack: Extra 1/),
    ]);
  });

  it('names the element of a refused hash, and the parent hash, with the reason', async () => {
    const { Encoder } = await import('@msgpack/msgpack');
    const encoder = new Encoder();
    const stored = (fields: Record<string, unknown>) => ({
      type: 'BlockStored',
      block_hashes: [1, 2],
      parent_block_hash: null,
      token_ids: [1, 2],
      block_size: 1,
      ...fields,
    });
    for (const [event, path, reason] of [
      [stored({ block_hashes: [1, 2, 1.5] }), 'events[0].block_hashes[2]', 'a hash is an integer or bytes, not 1.5'],
      [stored({ block_hashes: [1, 'x'] }), 'events[0].block_hashes[1]', 'a hash is an integer or bytes, not string'],
      [
        stored({ block_hashes: [1, new Uint8Array(5)] }),
        'events[0].block_hashes[1]',
        'a hash digest is 32 or 16 bytes, not 5',
      ],
      [stored({ parent_block_hash: 2.5 }), 'events[0].parent_block_hash', 'a hash is an integer or bytes, not 2.5'],
      [
        { type: 'BlockRemoved', block_hashes: [7, 8, true] },
        'events[0].block_hashes[2]',
        'a hash is an integer or bytes, not boolean',
      ],
    ] as const) {
      const result = decoder.decode(encoder.encode({ ts: 1.5, events: [event] }));
      expect(result).toEqual({ ok: false, error: expect.objectContaining({ path, reason }) });
    }
  });

  it('names the field of a later event, or of the batch, that it refuses, with the reason', async () => {
    const { Encoder } = await import('@msgpack/msgpack');
    const encoder = new Encoder();
    const removed = { type: 'BlockRemoved', block_hashes: [7], medium: 'GPU' };
    const stored = (fields: Record<string, unknown>) => ({
      type: 'BlockStored',
      block_hashes: [1],
      parent_block_hash: null,
      token_ids: [1],
      block_size: 1,
      ...fields,
    });
    for (const [event, path, reason] of [
      [7, 'events[1]', 'an event is a map or an array'],
      [{ type: 3 }, 'events[1].type', 'an event is tagged with its type name'],
      [stored({ block_size: 0 }), 'events[1].block_size', 'a block size is a whole number ≥ 1'],
      [stored({ block_hashes: 1 }), 'events[1].block_hashes', 'block hashes are an array'],
      [stored({ token_ids: 'ids' }), 'events[1].token_ids', 'token ids are an array'],
      [stored({ token_ids: [1, -2] }), 'events[1].token_ids[1]', 'a token id is a whole number'],
      [stored({ lora_id: 'a' }), 'events[1].lora_id', 'a LoRA id is a whole number or nil'],
      [stored({ medium: 1 }), 'events[1].medium', 'a medium is a string or nil'],
      [stored({ lora_name: 1 }), 'events[1].lora_name', 'a LoRA name is a string or nil'],
      [stored({ extra_keys: 1 }), 'events[1].extra_keys', 'extra keys are an array (one entry per block) or nil'],
      [stored({ extra_keys: [null, 1] }), 'events[1].extra_keys[1]', "a block's extra keys are an array or nil"],
      [stored({ group_idx: -1 }), 'events[1].group_idx', 'a group index is a whole number or nil'],
      [stored({ kv_cache_spec_kind: 1 }), 'events[1].kv_cache_spec_kind', 'a kind is a string or nil'],
      [
        stored({ kv_cache_spec_sliding_window: 1.5 }),
        'events[1].kv_cache_spec_sliding_window',
        'a sliding window is a whole number or nil',
      ],
      [{ ...removed, group_idx: 'g' }, 'events[1].group_idx', 'a group index is a whole number or nil'],
    ] as const) {
      const result = decoder.decode(encoder.encode({ ts: 1.5, events: [removed, event] }));
      expect(result, path).toEqual({ ok: false, error: expect.objectContaining({ path, reason }) });
    }
    expect(decoder.decode(encoder.encode([1.5, [removed], -1]))).toEqual({
      ok: false,
      error: expect.objectContaining({ path: 'data_parallel_rank', reason: 'a rank is a whole number or nil' }),
    });
  });

  it('reports a batch whose ts is negative or not finite as malformed at ts', async () => {
    const { Encoder } = await import('@msgpack/msgpack');
    const encoder = new Encoder();
    const events = [{ type: 'BlockRemoved', block_hashes: [7], medium: 'GPU' }];
    for (const ts of [-1.5, -1, -1_750_000_000.25, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])
      for (const payload of [encoder.encode({ ts, events }), encoder.encode([ts, events, 0])])
        expect(decoder.decode(payload), `ts ${ts}`).toEqual({
          ok: false,
          error: expect.objectContaining({
            code: 'ENGINE_EVENTS_MALFORMED',
            path: 'ts',
            reason: 'ts is seconds since the Unix epoch, a finite number ≥ 0',
          }),
        });
    expect(decoder.decode(encoder.encode({ ts: 0, events }))).toMatchObject({ ok: true, batch: { ts: 0 } });
  });

  it('reports a payload that is not bytes as malformed instead of throwing', () => {
    for (const [payload, shown] of [
      [undefined, 'undefined'],
      [null, 'null'],
      ['payload', '"payload"'],
      [[0x93], '[147]'],
      [147, '147'],
    ] as const) {
      const result = decoder.decode(payload as never);
      expect(result).toEqual({
        ok: false,
        error: expect.objectContaining({ code: 'ENGINE_EVENTS_MALFORMED', path: '' }),
      });
      if (!result.ok) expect(result.error.reason).toBe(`a payload is bytes (a Uint8Array), not ${shown}`);
    }
  });

  it('reports extra keys that are no msgpack value as malformed instead of throwing', async () => {
    const { Encoder } = await import('@msgpack/msgpack');
    const encoder = new Encoder();
    // A positional BlockStored whose extra keys are [[0xc1]] (a type byte msgpack never uses), or [{[0]: 1}] (a map with an array key).
    for (const extraKeys of [
      [0x91, 0x91, 0xc1],
      [0x91, 0x81, 0x91, 0x00, 0x01],
    ]) {
      const event = [
        0x99,
        ...encoder.encode('BlockStored'),
        ...encoder.encode([1]),
        0xc0,
        ...encoder.encode([1, 2]),
        0x02,
        0xc0,
        ...encoder.encode('GPU'),
        0xc0,
        ...extraKeys,
      ];
      const result = decoder.decode(Uint8Array.from([0x93, ...encoder.encode(1.5), 0x91, ...event, 0x00]));
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(codeOf(result.error)).toBe('ENGINE_EVENTS_MALFORMED');
      expect(result.error.message).toMatch(/not msgpack/);
    }
  });
});
