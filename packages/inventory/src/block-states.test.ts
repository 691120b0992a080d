import { describe, expect, it } from 'vitest';
import { BlockStates } from './block-states.js';

describe('BlockStates', () => {
  it('keeps each block its own state as it grows, blocks that share a word included', () => {
    const states = new BlockStates();
    // 1,000 blocks: their lo words repeat every 10, their hi words every 100.
    for (let block = 0; block < 1_000; block++) {
      const free = states.find(block % 10, Math.floor(block / 10));
      expect(free).toBeLessThan(0);
      states.add(free, block % 10, Math.floor(block / 10), block % 128);
    }
    for (let block = 0; block < 1_000; block++) {
      const slot = states.find(block % 10, Math.floor(block / 10));
      expect(states.stateAt(slot)).toBe(block % 128);
      states.setStateAt(slot, 0);
    }
    let used = 0;
    for (let slot = 0; slot < states.slots; slot++) if (states.stateAt(slot) >= 0) used++;
    expect(used).toBe(1_000);
    expect(states.find(10, 0)).toBeLessThan(0);
  });
});
