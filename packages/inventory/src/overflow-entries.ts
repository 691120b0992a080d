// The retained table's overflow entries: each worker that retains a block beyond the first one (which
// the block's table slot holds) has an entry here, linked from the slot into a list. Entries are
// numbered from 1, so that 0 ends a list; a freed entry is reused before the array grows.
import { type ResizableWords, resizableWords, resizedWords } from './resizable-words.js';

// An entry, three int32 words: the worker, its record of the block, and the next entry of the list + 1.
export const moreWords = 3;
export const moreWorker = 0;
export const moreRecord = 1;
export const moreNext = 2; // next overflow entry + 1; 0 = none
/**
 * The address space the entries reserve up front (192 MiB, none of it committed until used): they grow
 * in place by `moreStepEntries` at a time within it, and past it are copied once into `reservation`
 * times more.
 */
export const moreReservedEntries = 1 << 24;
// The kernel faults in a grown buffer's new pages when it grows (tens of µs a page here), so small
// steps keep that to 16 pages.
const moreStepEntries = 5_461; // × 12 bytes = 64 KiB
const reservation = 8;
const initialEntries = 64;

/** The overflow entries of a table, at most `most` in use at once. */
export class OverflowEntries {
  /** The entries' words, entry `m` at `(m − 1) × moreWords`; replaced when the entries outgrow their reservation. */
  words: ResizableWords;
  private used = 0; // entries ever handed out, the free ones among them included
  private free = 0; // the first free entry + 1, the rest linked through `moreNext`
  private inUse = 0;

  constructor(
    readonly most: number,
    reservedEntries = moreReservedEntries,
  ) {
    this.words = resizableWords(initialEntries * moreWords, reservedEntries * moreWords, most * moreWords);
  }

  /** How many more entries can be in use. */
  get room(): number {
    return this.most - this.inUse;
  }

  get byteLength(): number {
    return this.words.byteLength;
  }

  /** A new entry of `worker`'s `record`, linked before `next` (an entry + 1, or 0); its number + 1. */
  add(worker: number, record: number, next: number): number {
    const m = this.allocate();
    const at = (m - 1) * moreWords;
    this.words[at + moreWorker] = worker;
    this.words[at + moreRecord] = record;
    this.words[at + moreNext] = next;
    return m;
  }

  /** Frees entry `m` (+ 1), which its list no longer links. */
  release(m: number): void {
    this.words[(m - 1) * moreWords + moreNext] = this.free;
    this.free = m;
    this.inUse--;
  }

  private allocate(): number {
    this.inUse++;
    if (this.free !== 0) {
      const m = this.free;
      this.free = this.words[(m - 1) * moreWords + moreNext]!;
      return m;
    }
    const capacity = this.words.length / moreWords;
    if (this.used === capacity) {
      const grown = Math.min(capacity + Math.min(capacity, moreStepEntries), this.most);
      this.words = resizedWords(this.words, grown * moreWords, reservation, this.most * moreWords);
    }
    return ++this.used;
  }
}
