// The router decides from an inventory fed by an engine's KV events exactly as from kvreuse's own
// announcements: the engine's blocks, indexed by EngineInventoryFeed under the model-salted chain hash,
// are found for a prompt given as token ids, and a restarted publisher's blocks are never chosen.
import { EngineInventoryFeed, type BlockStored } from '@kvreuse/engine-events';
import { blockHashScheme } from '@kvreuse/inventory';
import { describe, expect, it } from 'vitest';
import { llama, profile, readyOf, Scenario, settingsOf, wallStart, workerOf } from '../test/support.js';
import { decide } from './decide.js';

const stored = (tokens: readonly number[], blocks: number, medium: string): BlockStored => ({
  type: 'BlockStored',
  blockHashes: Array.from({ length: blocks }, (_, i) => 0xf000_0000_0000_0000n + BigInt(i)),
  parentBlockHash: null,
  tokenIds: tokens.slice(0, blocks * llama.blockTokens),
  blockSize: llama.blockTokens,
  loraId: null,
  medium,
  loraName: null,
  extraKeys: null,
  groupIdx: null,
  kvCacheSpecKind: null,
  kvCacheSpecSlidingWindow: null,
});

describe('decide over an inventory fed by engine events', () => {
  it('pulls from the engine worker that holds the longest prefix, and never from a restarted publisher', () => {
    const s = new Scenario(16, settingsOf());
    const feed = new EngineInventoryFeed({
      inventory: s.inventory,
      scheme: blockHashScheme(llama, profile.blockHash.seed),
      now: () => s.wallMs,
    });
    const batch = (event: BlockStored) => ({
      ts: wallStart / 1000,
      events: [event],
      dataParallelRank: 0,
      unknownEventTypes: [],
    });
    for (const [id, blocks] of [
      ['vllm-a/dp0', 12],
      ['vllm-b/dp0', 6],
    ] as const) {
      feed.apply(id, batch(stored(s.tokens, blocks, 'CPU')));
      const { incarnation, epoch } = feed.identity(id)!;
      s.sources.observe(readyOf(workerOf(id, { incarnation }), epoch));
      s.sources.inventoryComplete(id, epoch);
    }
    const request = { tokens: s.tokens, destination: { worker: s.destination, localBlocks: 0 } };
    expect(decide(request, s.context())).toMatchObject({
      action: 'pull',
      source: { workerId: 'vllm-a/dp0', incarnation: 'vllm-a/dp0#0' },
      extent: 12,
    });
    // vllm-a's publisher restarts: its blocks are gone with its old incarnation, which is still the ready one.
    feed.restart('vllm-a/dp0');
    feed.apply('vllm-a/dp0', batch(stored(s.tokens, 12, 'CPU')));
    const decision = decide(request, s.context());
    expect(decision).toMatchObject({ action: 'pull', source: { workerId: 'vllm-b/dp0' }, extent: 6 });
    expect(decision.rejected).toContainEqual(
      expect.objectContaining({ worker: 'vllm-a/dp0', reason: 'stale-incarnation' }),
    );
  });
});
