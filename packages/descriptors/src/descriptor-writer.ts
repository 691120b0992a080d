// The descriptors of one rank pair, written into the typed arrays of a `RankPairPlan`. 64-bit fields are
// written as two 32-bit halves, which avoids creating a BigInt per descriptor.
const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const LOW = littleEndian ? 0 : 1;
const HIGH = 1 - LOW;
const INVERSE_TWO_POW_32 = 2 ** -32; // multiplying by a power of two is exact

/** Descriptor i copies `length[i]` bytes from `sourceOffset[i]` of source bank `sourceBank[i]` to `destinationOffset[i]` of destination bank `destinationBank[i]`. */
export interface PairDescriptors {
  readonly count: number;
  readonly sourceBank: Uint32Array;
  readonly sourceOffset: BigUint64Array;
  readonly destinationBank: Uint32Array;
  readonly destinationOffset: BigUint64Array;
  readonly length: BigUint64Array;
}

/** Appends byte ranges as descriptors; with `coalesce`, a range continuing the previous one in both banks extends it. */
export class DescriptorWriter {
  readonly #sourceBank: Uint32Array;
  readonly #destinationBank: Uint32Array;
  readonly #sourceOffset: BigUint64Array;
  readonly #destinationOffset: BigUint64Array;
  readonly #length: BigUint64Array;
  readonly #sourceOffset32: Uint32Array;
  readonly #destinationOffset32: Uint32Array;
  readonly #length32: Uint32Array;
  readonly #coalesce: boolean;
  #count = 0;
  #lastSourceBank = -1;
  #lastDestinationBank = -1;
  #sourceEnd = -1;
  #destinationEnd = -1;
  #runBytes = 0;

  /** `capacity`: the number of ranges that will be added at most. */
  constructor(capacity: number, coalesce: boolean) {
    this.#sourceBank = new Uint32Array(capacity);
    this.#destinationBank = new Uint32Array(capacity);
    this.#sourceOffset = new BigUint64Array(capacity);
    this.#destinationOffset = new BigUint64Array(capacity);
    this.#length = new BigUint64Array(capacity);
    this.#sourceOffset32 = new Uint32Array(this.#sourceOffset.buffer);
    this.#destinationOffset32 = new Uint32Array(this.#destinationOffset.buffer);
    this.#length32 = new Uint32Array(this.#length.buffer);
    this.#coalesce = coalesce;
  }

  /** Copies `bytes` from `sourceOffset` of source bank `sourceBank` to `destinationOffset` of destination bank `destinationBank`. */
  add(
    sourceBank: number,
    destinationBank: number,
    sourceOffset: number,
    destinationOffset: number,
    bytes: number,
  ): void {
    if (
      this.#coalesce &&
      sourceOffset === this.#sourceEnd &&
      destinationOffset === this.#destinationEnd &&
      sourceBank === this.#lastSourceBank &&
      destinationBank === this.#lastDestinationBank
    ) {
      this.#runBytes += bytes;
    } else {
      const count = this.#count;
      if (count > 0) this.#closeRun(count - 1);
      this.#sourceBank[count] = sourceBank;
      this.#destinationBank[count] = destinationBank;
      this.#sourceOffset32[2 * count + LOW] = sourceOffset >>> 0;
      this.#sourceOffset32[2 * count + HIGH] = (sourceOffset * INVERSE_TWO_POW_32) >>> 0;
      this.#destinationOffset32[2 * count + LOW] = destinationOffset >>> 0;
      this.#destinationOffset32[2 * count + HIGH] = (destinationOffset * INVERSE_TWO_POW_32) >>> 0;
      this.#lastSourceBank = sourceBank;
      this.#lastDestinationBank = destinationBank;
      this.#runBytes = bytes;
      this.#count = count + 1;
    }
    this.#sourceEnd = sourceOffset + bytes;
    this.#destinationEnd = destinationOffset + bytes;
  }

  #closeRun(index: number): void {
    this.#length32[2 * index + LOW] = this.#runBytes >>> 0;
    this.#length32[2 * index + HIGH] = (this.#runBytes * INVERSE_TWO_POW_32) >>> 0;
  }

  /** The descriptors written, in arrays of exactly `count` entries. */
  finish(): PairDescriptors {
    const count = this.#count;
    if (count > 0) this.#closeRun(count - 1);
    const full = count === this.#sourceBank.length;
    return {
      count,
      sourceBank: full ? this.#sourceBank : this.#sourceBank.slice(0, count),
      sourceOffset: full ? this.#sourceOffset : this.#sourceOffset.slice(0, count),
      destinationBank: full ? this.#destinationBank : this.#destinationBank.slice(0, count),
      destinationOffset: full ? this.#destinationOffset : this.#destinationOffset.slice(0, count),
      length: full ? this.#length : this.#length.slice(0, count),
    };
  }
}

/**
 * Whether to walk blocks outermost: when every (layer, plane) of a rank pair lies in one bank on each
 * side, a block's pieces may follow each other in memory and whole blocks can coalesce.
 */
export function blocksOutermost(sourceBanks: ArrayLike<number>, destinationBanks: ArrayLike<number>): boolean {
  const oneBank = (banks: ArrayLike<number>): boolean => {
    for (let i = 1; i < banks.length; i++) if (banks[i] !== banks[0]) return false;
    return true;
  };
  return oneBank(sourceBanks) && oneBank(destinationBanks);
}
