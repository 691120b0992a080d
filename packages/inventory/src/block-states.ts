// A small state per block hash, in typed arrays: what the room check (batch-room.ts) keeps for each
// block a batch touches, 9 bytes a slot at a load of at most one half, where a Map keyed by text took
// a string, an entry and an object per block.
import { mix } from './hash-words.js';

const usedBit = 0x80; // set in the state of every used slot
const firstSlots = 16;

/** Block hashes, as (lo, hi) words, each with a state of up to 7 bits; open addressing, never shrinks. */
export class BlockStates {
  private words = new Int32Array(2 * firstSlots);
  private states = new Uint8Array(firstSlots);
  private count = 0;

  /** Slots, used or not: `stateAt` of each slot from 0 up to this visits every block. */
  get slots(): number {
    return this.states.length;
  }

  /** The slot holding the block, or −1 − the free slot it would take. */
  find(lo: number, hi: number): number {
    const mask = this.states.length - 1;
    for (let slot = mix(lo, hi) & mask; ; slot = (slot + 1) & mask) {
      if (this.states[slot] === 0) return -1 - slot;
      if (this.words[2 * slot] === lo && this.words[2 * slot + 1] === hi) return slot;
    }
  }

  /** Adds a block `find` did not find, at `free` (what `find` returned); returns its slot. Slots move when it grows. */
  add(free: number, lo: number, hi: number, state: number): number {
    let slot = -1 - free;
    if (2 * (this.count + 1) > this.states.length) {
      this.grow();
      slot = -1 - this.find(lo, hi);
    }
    this.words[2 * slot] = lo;
    this.words[2 * slot + 1] = hi;
    this.states[slot] = state | usedBit;
    this.count++;
    return slot;
  }

  /** The state at a slot; −1 for a free slot. */
  stateAt(slot: number): number {
    const state = this.states[slot]!;
    return state === 0 ? -1 : state & ~usedBit;
  }

  /** Sets the state of a used slot. */
  setStateAt(slot: number, state: number): void {
    this.states[slot] = state | usedBit;
  }

  private grow(): void {
    const { words, states } = this;
    this.words = new Int32Array(2 * words.length);
    this.states = new Uint8Array(2 * states.length);
    for (let slot = 0; slot < states.length; slot++) {
      if (states[slot] === 0) continue;
      const free = -1 - this.find(words[2 * slot]!, words[2 * slot + 1]!);
      this.words[2 * free] = words[2 * slot]!;
      this.words[2 * free + 1] = words[2 * slot + 1]!;
      this.states[free] = states[slot]!;
    }
  }
}
