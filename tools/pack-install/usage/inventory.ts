import { hashBlockChain, RetainedInventory } from '@kvreuse/inventory';

// A prompt of 5 blocks of 64 tokens; worker decode-0 retains its first 3 blocks in GPU memory, the
// next one in host memory.
const tokens = Array.from({ length: 5 * 64 }, (_, i) => (i * 31) % 151_936);
const chain = hashBlockChain(tokens, { salt: 0x5eedn, blockTokens: 64 });
const now = 1_750_000_000_000;
const inventory = new RetainedInventory({ now: () => now });
inventory.apply({
  workerId: 'decode-0',
  incarnation: 'decode-0-a',
  epoch: 1,
  seq: 0,
  events: [
    { type: 'stored', tier: 'gpu', blocks: chain.slice(0, 3), expiresAt: now + 60_000 },
    { type: 'stored', tier: 'host', blocks: chain.slice(3, 4), expiresAt: now + 60_000 },
  ],
});
const [prefix] = inventory.longestRetainedPrefix(chain);
console.log(
  JSON.stringify({
    blocks: chain.length,
    workerId: prefix?.workerId,
    retained: prefix?.blocks,
    gpuBlocks: prefix?.gpuBlocks,
    hostBlocks: prefix?.hostBlocks,
  }),
);
