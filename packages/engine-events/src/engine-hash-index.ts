import type { EngineBlockHash } from './engine-event.js';

const scratch64 = new BigUint64Array(1);
const scratch32 = new Uint32Array(scratch64.buffer);
/** Little-endian word order of a BigUint64Array's element, as every platform Node runs on has it. */
const low = 0;
const high = 1;
const empty = 0;

/**
 * Loads the 64-bit key of an engine hash into `scratch32` (low word first): an integer's 64 bits (so a
 * signed and an unsigned form of the same bits are one key), a digest's last 8 bytes big-endian (the
 * integer vLLM publishes for that digest with int hashes). Two digests of one worker sharing their last
 * 8 bytes would share an entry: with 64-bit keys, about one chance in 2^65 / n² for n blocks.
 */
function loadKey(hash: EngineBlockHash): void {
  if (typeof hash === 'bigint') {
    // Storing into a BigUint64Array takes the value modulo 2^64: a negative hash lands as its unsigned bits.
    scratch64[0] = hash;
    return;
  }
  const view = new DataView(hash.buffer, hash.byteOffset, hash.length);
  scratch32[high] = view.getUint32(hash.length - 8, false);
  scratch32[low] = view.getUint32(hash.length - 4, false);
}

/** The key of an engine hash as one 64-bit value (what `EngineHashIndex` indexes by). */
export function engineHashKey(hash: EngineBlockHash): bigint {
  loadKey(hash);
  return scratch64[0]!;
}

/**
 * One engine worker's blocks: engine hash key → kvreuse chain hash and the tiers it is held on, in
 * typed arrays (open addressing, linear probing, deletion by backward shift), so that applying an
 * event allocates nothing per block. Slot words: key low, key high, chain low, chain high; a slot is
 * free when its tiers byte is 0.
 */
export class EngineHashIndex {
  #words = new Uint32Array(4 * 1024);
  #tiers = new Uint8Array(1024);
  #mask = 1023;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  clear(): void {
    this.#tiers.fill(empty);
    this.#size = 0;
  }

  /** The slot holding `hash`, or −1. */
  find(hash: EngineBlockHash): number {
    loadKey(hash);
    return this.#probe(scratch32[low]!, scratch32[high]!);
  }

  tiersAt(slot: number): number {
    return this.#tiers[slot]!;
  }

  /** Copies the chain hash of a slot into `out` at `index` (a Uint32Array view of a BigUint64Array). */
  chainInto(slot: number, out: Uint32Array, index: number): void {
    out[2 * index] = this.#words[4 * slot + 2]!;
    out[2 * index + 1] = this.#words[4 * slot + 3]!;
  }

  chainAt(slot: number): bigint {
    const at = 4 * slot;
    return (BigInt(this.#words[at + 3]!) << 32n) | BigInt(this.#words[at + 2]!);
  }

  /**
   * Records that `hash` (chain hash words `chainLo`, `chainHi`) is held on the tiers in `tierBit`;
   * returns whether that tier is new for it. A known hash keeps the chain hash it had.
   */
  hold(hash: EngineBlockHash, chainLo: number, chainHi: number, tierBit: number): boolean {
    loadKey(hash);
    const keyLo = scratch32[low]!;
    const keyHi = scratch32[high]!;
    const found = this.#probe(keyLo, keyHi);
    if (found >= 0) {
      const had = this.#tiers[found]!;
      this.#tiers[found] = had | tierBit;
      return (had & tierBit) === 0;
    }
    if (2 * (this.#size + 1) > this.#tiers.length) this.#grow();
    let slot = this.#home(keyLo, keyHi);
    while (this.#tiers[slot] !== empty) slot = (slot + 1) & this.#mask;
    this.#put(slot, keyLo, keyHi, chainLo, chainHi, tierBit);
    this.#size += 1;
    return true;
  }

  /** Takes the tier off the slot's block; frees the slot once the block is on no tier. */
  release(slot: number, tierBit: number): void {
    const left = this.#tiers[slot]! & ~tierBit;
    if (left !== empty) {
      this.#tiers[slot] = left;
      return;
    }
    this.#size -= 1;
    // Backward-shift deletion: pull later entries of the run into the hole when their home allows.
    let hole = slot;
    for (let next = (slot + 1) & this.#mask; this.#tiers[next] !== empty; next = (next + 1) & this.#mask) {
      const home = this.#home(this.#words[4 * next]!, this.#words[4 * next + 1]!);
      if (((next - home) & this.#mask) >= ((next - hole) & this.#mask)) {
        this.#words.copyWithin(4 * hole, 4 * next, 4 * next + 4);
        this.#tiers[hole] = this.#tiers[next]!;
        hole = next;
      }
    }
    this.#tiers[hole] = empty;
  }

  #home(keyLo: number, keyHi: number): number {
    return (Math.imul(keyLo ^ Math.imul(keyHi, 0x9e3779b1), 0x85ebca6b) >>> 15) & this.#mask;
  }

  #probe(keyLo: number, keyHi: number): number {
    for (let slot = this.#home(keyLo, keyHi); this.#tiers[slot] !== empty; slot = (slot + 1) & this.#mask) {
      if (this.#words[4 * slot] === keyLo && this.#words[4 * slot + 1] === keyHi) return slot;
    }
    return -1;
  }

  #put(slot: number, keyLo: number, keyHi: number, chainLo: number, chainHi: number, tiers: number): void {
    const at = 4 * slot;
    this.#words[at] = keyLo;
    this.#words[at + 1] = keyHi;
    this.#words[at + 2] = chainLo;
    this.#words[at + 3] = chainHi;
    this.#tiers[slot] = tiers;
  }

  #grow(): void {
    const words = this.#words;
    const tiers = this.#tiers;
    this.#words = new Uint32Array(words.length * 2);
    this.#tiers = new Uint8Array(tiers.length * 2);
    this.#mask = this.#tiers.length - 1;
    for (let old = 0; old < tiers.length; old++) {
      if (tiers[old] === empty) continue;
      let slot = this.#home(words[4 * old]!, words[4 * old + 1]!);
      while (this.#tiers[slot] !== empty) slot = (slot + 1) & this.#mask;
      this.#put(slot, words[4 * old]!, words[4 * old + 1]!, words[4 * old + 2]!, words[4 * old + 3]!, tiers[old]!);
    }
  }
}
