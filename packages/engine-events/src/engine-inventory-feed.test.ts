import { blockHashSalt, hashBlockChain, RetainedInventory } from '@kvreuse/inventory';
import { describe, expect, it } from 'vitest';
import type { BlockStored, EngineEvent, EngineEventBatch } from './engine-event.js';
import { EngineInventoryFeed } from './engine-inventory-feed.js';
import { hashVllmBlockChain, vllmIntBlockHash, vllmNoneHash } from './vllm-block-hash.js';

const now = 1_800_000_000_000;
const scheme = { salt: blockHashSalt('ab'.repeat(32), 'seed'), blockTokens: 4 };
const noneHash = vllmNoneHash('0');
const tokens = Array.from({ length: 32 }, (_, i) => 500 + i);
const digests = hashVllmBlockChain(tokens, { blockSize: 4, noneHash });

const batch = (...events: EngineEvent[]): EngineEventBatch => ({
  ts: now / 1000,
  events,
  dataParallelRank: 0,
  unknownEventTypes: [],
});
const stored = (from: number, to: number, fields: Partial<BlockStored> = {}): BlockStored => ({
  type: 'BlockStored',
  blockHashes: digests.slice(from, to).map(vllmIntBlockHash),
  parentBlockHash: from === 0 ? null : vllmIntBlockHash(digests[from - 1]!),
  tokenIds: tokens.slice(from * 4, to * 4),
  blockSize: 4,
  loraId: null,
  medium: 'GPU',
  loraName: null,
  extraKeys: null,
  groupIdx: null,
  kvCacheSpecKind: null,
  kvCacheSpecSlidingWindow: null,
  ...fields,
});

function open(): { inventory: RetainedInventory; feed: EngineInventoryFeed } {
  const inventory = new RetainedInventory({ now: () => now });
  return { inventory, feed: new EngineInventoryFeed({ inventory, scheme, now: () => now }) };
}

describe('EngineInventoryFeed', () => {
  it('refuses an inventory, scheme or clock of the wrong shape when it is constructed, naming the option', () => {
    const inventory = new RetainedInventory({ now: () => now });
    const refused = (argument: string) => expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument });
    for (const malformed of [
      { ...scheme, salt: scheme.salt.toString(16) }, // a salt read back from JSON: every block was skipped as `token-range`
      { ...scheme, salt: -1n },
      { ...scheme, blockTokens: 0 },
      undefined,
    ])
      expect(() => new EngineInventoryFeed({ inventory, scheme: malformed as never })).toThrow(
        refused('options.scheme'),
      );
    expect(() => new EngineInventoryFeed({ inventory: {} as never, scheme })).toThrow(refused('options.inventory'));
    expect(() => new EngineInventoryFeed({ inventory, scheme, now: 1 as never })).toThrow(refused('options.now'));
    expect(() => new EngineInventoryFeed({ inventory, scheme, incarnationOf: 'w' as never })).toThrow(
      refused('options.incarnationOf'),
    );
  });

  it('refuses a batch of the wrong shape, naming the field, and leaves the worker as it was', () => {
    const { feed } = open();
    const refused = (argument: string) => expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument });
    feed.apply('w', batch(stored(0, 2)));
    const removal = { type: 'BlockRemoved', medium: null, groupIdx: null } as const;
    for (const [argument, malformed] of [
      ['batch', null],
      ['batch.ts', { ...batch(), ts: -1 }],
      ['batch.ts', { ...batch(), ts: Number.NaN }],
      ['batch.ts', { ...batch(), ts: Number.POSITIVE_INFINITY }],
      ['batch.ts', { ...batch(), ts: '1.5' }],
      ['batch.ts', { ...batch(), ts: undefined }],
      ['batch.events', { ...batch(), events: undefined }],
      ['batch.events[1].type', batch(stored(2, 3), { type: 'BlockEvicted' } as never)],
      ['batch.events[1].blockHashes[0]', batch(stored(2, 3), { ...removal, blockHashes: [new Uint8Array(4)] })],
      ['batch.events[0].blockHashes', batch({ ...removal, blockHashes: undefined } as never)],
      ['batch.events[0].parentBlockHash', batch(stored(2, 3, { parentBlockHash: 'p' as never }))],
      ['batch.events[0].tokenIds[1]', batch(stored(0, 1, { tokenIds: [500, -1, 502, 503] }))],
      ['batch.events[0].blockSize', batch(stored(0, 1, { blockSize: Number.NaN }))],
      ['batch.events[0].extraKeys', batch(stored(0, 1, { extraKeys: 'lora' as never }))],
      ['batch.events[0].medium', batch(stored(0, 1, { medium: 1 as never }))],
    ] as const) {
      expect(() => feed.apply('w', malformed as never)).toThrow(refused(argument));
      expect(() => feed.apply('new', malformed as never)).toThrow(refused(argument));
    }
    expect(() => feed.apply('w', { ...batch(stored(2, 3)), ts: -1 })).toThrow(
      'engine events: batch.ts = -1 is refused: ts is seconds since the Unix epoch, a finite number ≥ 0',
    );
    // Worded as the decoder words its refusal of such a ts (decode-batch.test.ts).
    for (const ts of [-1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])
      expect(() => feed.apply('w', { ...batch(stored(2, 3)), ts }), `ts ${ts}`).toThrow(
        expect.objectContaining({
          argument: 'batch.ts',
          reason: 'ts is seconds since the Unix epoch, a finite number ≥ 0',
        }),
      );
    expect(feed.heldBlocks('w')).toEqual({ gpu: 2, host: 0 });
    expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[2]!))).toBeUndefined();
    expect(feed.identity('new')).toBeUndefined();
  });

  it('keeps no worker whose first batch or restart the inventory refuses', () => {
    const { inventory, feed } = open();
    // Another writer holds epochs 1 and 2 of these worker ids under other incarnations: refused.
    inventory.apply({ workerId: 'w', incarnation: 'someone-else', epoch: 1, seq: 1, events: [] });
    inventory.apply({ workerId: 'v', incarnation: 'someone-else', epoch: 2, seq: 1, events: [] });
    expect(() => feed.apply('w', batch(stored(0, 2)))).toThrow(
      expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT' }),
    );
    expect(() => feed.restart('v')).toThrow(expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT' }));
    expect(feed.identity('w')).toBeUndefined();
    expect(feed.identity('v')).toBeUndefined();
  });

  it('indexes blocks an engine stored in runs so that a prompt hashed by kvreuse meets them', () => {
    const { inventory, feed } = open();
    expect(feed.apply('vllm-0/dp0', batch(stored(0, 3), stored(3, 8, { medium: 'CPU' })))).toEqual({
      stored: 8,
      removed: 0,
      cleared: false,
      skipped: {},
      ignored: false,
    });
    const [prefix] = inventory.longestRetainedPrefix(hashBlockChain(tokens, scheme));
    expect(prefix).toMatchObject({
      workerId: 'vllm-0/dp0',
      incarnation: 'vllm-0/dp0#0',
      blocks: 8,
      gpuBlocks: 3,
      hostBlocks: 5,
    });
    expect(feed.kvreuseHashOf('vllm-0/dp0', vllmIntBlockHash(digests[7]!))).toBe(hashBlockChain(tokens, scheme)[7]);
    // A digest is indexed by the integer vLLM publishes for it.
    expect(feed.kvreuseHashOf('vllm-0/dp0', digests[7]!)).toBe(hashBlockChain(tokens, scheme)[7]);
    expect(feed.kvreuseHashOf('vllm-0/dp0', 12345n)).toBeUndefined();
    expect(() => feed.kvreuseHashOf('vllm-0/dp0', digests[7]!.subarray(28))).toThrow(
      expect.objectContaining({ code: 'ENGINE_EVENTS_INVALID_INPUT', argument: 'engineHash' }),
    );
  });

  it('finds a block by the signed form of its hash and drops it from its tier only', () => {
    const { inventory, feed } = open();
    feed.apply('w', batch(stored(0, 2), stored(0, 2, { medium: 'CPU_PINNED' })));
    const signed = BigInt.asIntN(64, vllmIntBlockHash(digests[1]!));
    const outcome = feed.apply(
      'w',
      batch({ type: 'BlockRemoved', blockHashes: [signed], medium: 'GPU', groupIdx: null }),
    );
    expect(outcome.removed).toBe(1);
    expect(feed.heldBlocks('w')).toEqual({ gpu: 1, host: 2 });
    expect(inventory.longestRetainedPrefix(hashBlockChain(tokens, scheme))[0]).toMatchObject({
      blocks: 2,
      gpuBlocks: 1,
      hostBlocks: 2,
    });
  });

  it('keeps raw digests as they are published', () => {
    const { inventory, feed } = open();
    feed.apply(
      'w',
      batch(
        stored(0, 2, { blockHashes: digests.slice(0, 2) }),
        stored(2, 4, { blockHashes: digests.slice(2, 4), parentBlockHash: digests[1]! }),
      ),
    );
    expect(inventory.longestRetainedPrefix(hashBlockChain(tokens, scheme))[0]?.blocks).toBe(4);
  });

  it('leaves out, and counts, what kvreuse cannot index', () => {
    const { feed } = open();
    const outcome = feed.apply(
      'w',
      batch(
        stored(0, 1, { medium: 'DISK' }),
        stored(0, 1, { groupIdx: 1 }),
        stored(0, 1, { loraName: 'adapter' }),
        stored(0, 1, { extraKeys: [['salt']] }),
        stored(0, 1, { blockSize: 8 }),
        stored(0, 2, { tokenIds: tokens.slice(0, 4) }),
        stored(0, 1, { tokenIds: [1, 2, 3, 2 ** 33] }),
        stored(4, 5),
        { type: 'BlockRemoved', blockHashes: [1n, 2n], medium: 'GPU', groupIdx: null },
      ),
    );
    expect(outcome).toEqual({
      stored: 0,
      removed: 0,
      cleared: false,
      ignored: false,
      skipped: {
        medium: 1,
        group: 1,
        'extra-keys': 2,
        'block-size': 1,
        'token-count': 2,
        'token-range': 1,
        'unknown-parent': 1,
        'unknown-block': 2,
      },
    });
  });

  it('drops everything on AllBlocksCleared and on a publisher restart, under a new incarnation', () => {
    const { inventory, feed } = open();
    const chain = hashBlockChain(tokens, scheme);
    feed.apply('w', batch(stored(0, 2)));
    expect(feed.apply('w', batch({ type: 'AllBlocksCleared' })).cleared).toBe(true);
    expect(feed.heldBlocks('w')).toEqual({ gpu: 0, host: 0 });
    expect(inventory.longestRetainedPrefix(chain)).toEqual([]);
    feed.apply('w', batch(stored(0, 2)));
    feed.restart('w');
    expect(feed.identity('w')).toEqual({ incarnation: 'w#1', epoch: 2 });
    expect(inventory.longestRetainedPrefix(chain)).toEqual([]);
    feed.apply('w', batch(stored(0, 1)));
    expect(inventory.longestRetainedPrefix(chain)[0]).toMatchObject({ incarnation: 'w#1', blocks: 1 });
    expect(feed.forget('w')).toBe(true);
    expect(inventory.workerCount).toBe(0);
  });

  it('moves a hash stored again under another chain: the block it stood for is removed, on every tier', () => {
    const { inventory, feed } = open();
    const chain = hashBlockChain(tokens, scheme);
    const moved = vllmIntBlockHash(digests[1]!);
    const otherTokens = tokens.map((token) => token + 1000);
    const otherChain = hashBlockChain(otherTokens, scheme);
    feed.apply('w', batch(stored(0, 2), stored(1, 2, { medium: 'CPU' })));
    // The engine now says block 1's hash stands for another block: the first of another run.
    const outcome = feed.apply('w', batch(stored(1, 2, { parentBlockHash: null, tokenIds: otherTokens.slice(0, 4) })));
    expect(outcome).toEqual({ stored: 1, removed: 2, cleared: false, skipped: {}, ignored: false });
    expect(feed.kvreuseHashOf('w', moved)).toBe(otherChain[0]);
    expect(feed.heldBlocks('w')).toEqual({ gpu: 2, host: 0 });
    expect(inventory.longestRetainedPrefix(chain)[0]).toMatchObject({ blocks: 1, gpuBlocks: 1, hostBlocks: 0 });
    expect(inventory.longestRetainedPrefix(otherChain)[0]).toMatchObject({ blocks: 1, gpuBlocks: 1 });
    // A later removal of the hash finds the block it stands for now.
    const removal = { type: 'BlockRemoved', blockHashes: [moved], medium: 'GPU', groupIdx: null } as const;
    expect(feed.apply('w', batch(removal))).toMatchObject({ removed: 1, skipped: {} });
    expect(inventory.longestRetainedPrefix(otherChain)).toEqual([]);
    // A block stored again under the chain it had is no move.
    expect(feed.apply('w', batch(stored(0, 1)))).toMatchObject({ stored: 1, removed: 0 });
  });

  it('takes back a batch the inventory refuses: its index is as it was before the batch', () => {
    const { inventory, feed } = open();
    const chain = hashBlockChain(tokens, scheme);
    feed.apply('w', batch(stored(0, 2), stored(0, 1, { medium: 'CPU' })));
    // The worker's inventory lease ended, and another writer took epoch 1 of its id: the feed's batches are refused.
    inventory.removeWorker('w');
    inventory.apply({ workerId: 'w', incarnation: 'someone-else', epoch: 1, seq: 1, events: [] });
    const removeBlock1 = {
      type: 'BlockRemoved',
      blockHashes: [vllmIntBlockHash(digests[1]!)],
      medium: 'GPU',
      groupIdx: null,
    } as const;
    for (const refused of [
      batch(
        removeBlock1,
        stored(2, 4),
        stored(1, 2, { medium: 'CPU' }),
        // Block 0's hash moved to other tokens.
        stored(0, 1, { tokenIds: tokens.slice(4, 8) }),
      ),
      batch(stored(2, 4), { type: 'AllBlocksCleared' }, stored(0, 1)),
    ])
      expect(() => feed.apply('w', refused)).toThrow(expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT' }));
    expect(feed.heldBlocks('w')).toEqual({ gpu: 2, host: 1 });
    expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[0]!))).toBe(chain[0]);
    expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[1]!))).toBe(chain[1]);
    expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[2]!))).toBeUndefined();
    inventory.removeWorker('w');
    expect(feed.apply('w', batch(removeBlock1))).toMatchObject({ removed: 1, skipped: {} });
  });

  it('takes back a batch the inventory ignores, and says so: another writer holds a newer epoch of the worker', () => {
    const { inventory, feed } = open();
    const chain = hashBlockChain(tokens, scheme);
    feed.apply('w', batch(stored(0, 2)));
    inventory.apply({ workerId: 'w', incarnation: 'newer', epoch: 2, seq: 1, events: [] });
    const ignored = feed.apply(
      'w',
      batch(
        { type: 'BlockRemoved', blockHashes: [vllmIntBlockHash(digests[1]!)], medium: 'GPU', groupIdx: null },
        stored(2, 4),
        stored(0, 1, { tokenIds: tokens.slice(4, 8) }),
        { type: 'AllBlocksCleared' },
      ),
    );
    expect(ignored).toEqual({ stored: 0, removed: 0, cleared: false, skipped: {}, ignored: true });
    expect(feed.heldBlocks('w')).toEqual({ gpu: 2, host: 0 });
    expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[0]!))).toBe(chain[0]);
    expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[1]!))).toBe(chain[1]);
    expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[2]!))).toBeUndefined();
  });

  it('leaves the worker as it was when the inventory refuses or ignores its restart', () => {
    const { inventory, feed } = open();
    const chain = hashBlockChain(tokens, scheme);
    feed.apply('w', batch(stored(0, 2)));
    const unchanged = () => {
      expect(feed.identity('w')).toEqual({ incarnation: 'w#0', epoch: 1 });
      expect(feed.heldBlocks('w')).toEqual({ gpu: 2, host: 0 });
      expect(feed.kvreuseHashOf('w', vllmIntBlockHash(digests[1]!))).toBe(chain[1]);
    };
    // Another writer holds epoch 2, the restart's, under another incarnation: refused.
    inventory.apply({ workerId: 'w', incarnation: 'someone-else', epoch: 2, seq: 1, events: [] });
    expect(() => feed.restart('w')).toThrow(expect.objectContaining({ code: 'INVENTORY_INVALID_EVENT' }));
    unchanged();
    // It holds epoch 3 now, above the restart's: ignored.
    inventory.apply({ workerId: 'w', incarnation: 'newer', epoch: 3, seq: 1, events: [] });
    expect(feed.restart('w')).toBe(false);
    unchanged();
    inventory.removeWorker('w');
    expect(feed.restart('w')).toBe(true);
    expect(feed.identity('w')).toEqual({ incarnation: 'w#1', epoch: 2 });
    expect(feed.heldBlocks('w')).toEqual({ gpu: 0, host: 0 });
  });
});
