import type { EngineBlockHash } from './engine-event.js';
import { EngineEventsInputError } from './errors.js';

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

const minInt64 = -(1n << 63n);
const maxUint64 = (1n << 64n) - 1n;

/** What an engine hash is, as a refusal says it. */
export const engineHashRule = 'an engine hash is a signed or unsigned 64-bit bigint, or a digest of 8 bytes or more';

/** Whether `hash` is a signed or unsigned 64-bit integer, or a digest of 8 bytes or more. */
export function isEngineHash(hash: unknown): boolean {
  return typeof hash === 'bigint'
    ? hash >= minInt64 && hash <= maxUint64
    : hash instanceof Uint8Array && hash.length >= 8;
}

/** Refuses, naming `argument`, a hash that is neither a signed or unsigned 64-bit integer nor a digest of 8 bytes or more. */
export function checkEngineHash(argument: string, hash: unknown): void {
  if (!isEngineHash(hash)) throw new EngineEventsInputError(argument, hash, engineHashRule);
}

/** The key of an engine hash as one 64-bit value (what `EngineHashIndex` indexes by). */
export function engineHashKey(hash: EngineBlockHash): bigint {
  checkEngineHash('hash', hash);
  loadKey(hash);
  return scratch64[0]!;
}

/** A slot of the previous table whose entry has moved to the current one: probing goes on past it. */
const moved = 0x80;
/** Slots of the previous table moved per `find` and `hold` while the index grows (2 would do: see `#grow`). */
const moveStep = 4;

/**
 * One engine worker's blocks: engine hash key → kvreuse chain hash and the tiers it is held on, in
 * typed arrays (open addressing, linear probing, deletion by backward shift), so that applying an
 * event allocates nothing per block. Slot words: key low, key high, chain low, chain high; a slot is
 * free when its tiers byte is 0. It grows without a pause: the previous table's entries move to the
 * doubled one a few per operation, and any that an operation looks for moves on the spot.
 */
export class EngineHashIndex {
  #words = new Uint32Array(4 * 1024);
  #tiers = new Uint8Array(1024);
  #mask = 1023;
  #size = 0;
  // While growing: the previous table, and how many of its slots (from 0) may still hold an entry.
  #previousWords = new Uint32Array(0);
  #previousTiers = new Uint8Array(0);
  #unmoved = 0;

  get size(): number {
    return this.#size;
  }

  /** Whether entries of the previous table are still moving to the current one. */
  get growing(): boolean {
    return this.#unmoved > 0;
  }

  clear(): void {
    this.#tiers.fill(empty);
    this.#dropPrevious();
    this.#size = 0;
  }

  /** The slot holding `hash`, or −1. */
  find(hash: EngineBlockHash): number {
    loadKey(hash);
    return this.#slotOf(scratch32[low]!, scratch32[high]!);
  }

  tiersAt(slot: number): number {
    return this.#tiers[slot]!;
  }

  /** Copies the chain hash of a slot into `out` at `index` (a Uint32Array view of a BigUint64Array). */
  chainInto(slot: number, out: Uint32Array, index: number): void {
    out[2 * index] = this.#words[4 * slot + 2]!;
    out[2 * index + 1] = this.#words[4 * slot + 3]!;
  }

  /** Whether the slot's block is held under the chain hash of words `chainLo`, `chainHi`. */
  chainIs(slot: number, chainLo: number, chainHi: number): boolean {
    return this.#words[4 * slot + 2] === chainLo && this.#words[4 * slot + 3] === chainHi;
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
    const found = this.#slotOf(keyLo, keyHi);
    if (found >= 0) {
      const had = this.#tiers[found]!;
      this.#tiers[found] = had | tierBit;
      return (had & tierBit) === 0;
    }
    if (2 * (this.#size + 1) > this.#tiers.length) this.#grow();
    this.#insert(keyLo, keyHi, chainLo, chainHi, tierBit);
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
      const home = this.#home(this.#words[4 * next]!, this.#words[4 * next + 1]!, this.#mask);
      if (((next - home) & this.#mask) >= ((next - hole) & this.#mask)) {
        this.#words.copyWithin(4 * hole, 4 * next, 4 * next + 4);
        this.#tiers[hole] = this.#tiers[next]!;
        hole = next;
      }
    }
    this.#tiers[hole] = empty;
  }

  #home(keyLo: number, keyHi: number, mask: number): number {
    return (Math.imul(keyLo ^ Math.imul(keyHi, 0x9e3779b1), 0x85ebca6b) >>> 15) & mask;
  }

  /** The current table's slot of a key, after moving it from the previous table if it is there; or −1. */
  #slotOf(keyLo: number, keyHi: number): number {
    const slot = this.#probe(keyLo, keyHi);
    if (slot >= 0 || this.#unmoved === 0) return slot;
    const from = this.#previousSlotOf(keyLo, keyHi);
    const slotNow = from < 0 ? -1 : this.#move(from);
    this.#moveSome(); // inserts only: `slotNow` stays where it is
    return slotNow;
  }

  #probe(keyLo: number, keyHi: number): number {
    for (let slot = this.#home(keyLo, keyHi, this.#mask); this.#tiers[slot] !== empty; slot = (slot + 1) & this.#mask) {
      if (this.#words[4 * slot] === keyLo && this.#words[4 * slot + 1] === keyHi) return slot;
    }
    return -1;
  }

  #previousSlotOf(keyLo: number, keyHi: number): number {
    const tiers = this.#previousTiers;
    const mask = tiers.length - 1;
    for (let slot = this.#home(keyLo, keyHi, mask); tiers[slot] !== empty; slot = (slot + 1) & mask) {
      if (
        tiers[slot] !== moved &&
        this.#previousWords[4 * slot] === keyLo &&
        this.#previousWords[4 * slot + 1] === keyHi
      )
        return slot;
    }
    return -1;
  }

  /** Moves the previous table's entry at `from` into the current table; returns its slot there. */
  #move(from: number): number {
    const words = this.#previousWords;
    const at = 4 * from;
    const slot = this.#insert(words[at]!, words[at + 1]!, words[at + 2]!, words[at + 3]!, this.#previousTiers[from]!);
    this.#previousTiers[from] = moved;
    return slot;
  }

  /** Moves the next `moveStep` slots of the previous table, from its end down; drops it once all have moved. */
  #moveSome(): void {
    for (let n = 0; n < moveStep && this.#unmoved > 0; n++) {
      const from = --this.#unmoved;
      const tiers = this.#previousTiers[from]!;
      if (tiers !== empty && tiers !== moved) this.#move(from);
    }
    if (this.#unmoved === 0) this.#dropPrevious();
  }

  #insert(keyLo: number, keyHi: number, chainLo: number, chainHi: number, tiers: number): number {
    let slot = this.#home(keyLo, keyHi, this.#mask);
    while (this.#tiers[slot] !== empty) slot = (slot + 1) & this.#mask;
    const at = 4 * slot;
    this.#words[at] = keyLo;
    this.#words[at + 1] = keyHi;
    this.#words[at + 2] = chainLo;
    this.#words[at + 3] = chainHi;
    this.#tiers[slot] = tiers;
    return slot;
  }

  /**
   * Doubles the table, keeping the previous one to move from. It grows at half load, so the doubled
   * table takes a quarter of its slots in new entries to fill up again, while the previous one has
   * half as many slots to move: 2 per operation would empty it in time.
   */
  #grow(): void {
    if (this.#unmoved > 0) this.#moveAll();
    this.#previousWords = this.#words;
    this.#previousTiers = this.#tiers;
    this.#unmoved = this.#tiers.length;
    this.#words = new Uint32Array(this.#words.length * 2);
    this.#tiers = new Uint8Array(this.#tiers.length * 2);
    this.#mask = this.#tiers.length - 1;
  }

  #moveAll(): void {
    while (this.#unmoved > 0) this.#moveSome();
  }

  #dropPrevious(): void {
    this.#previousWords = new Uint32Array(0);
    this.#previousTiers = new Uint8Array(0);
    this.#unmoved = 0;
  }
}
