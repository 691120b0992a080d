const pageWords = 1024; // 4 KiB of int32

/**
 * A zeroed `Int32Array` allocated before it is needed, one 4 KiB page written per `touch`, so that
 * the kernel's page faults (tens of µs each on a virtual machine) are spread over many operations
 * instead of all landing on the one that first needs the array.
 */
export class PreparedArray {
  private array = new Int32Array(0);
  private touched = 0;

  /** Bytes allocated ahead, touched or not. */
  get byteLength(): number {
    return this.array.byteLength;
  }

  /** Writes the next untouched page of an array of `length` words, allocating it first if need be. */
  touch(length: number): void {
    if (this.array.length !== length) {
      this.array = new Int32Array(length);
      this.touched = 0;
    }
    if (this.touched < length) {
      this.array[this.touched] = 0;
      this.touched += pageWords;
    }
  }

  /** A zeroed array of `length` words: the prepared one if it has that length, else a new one. */
  take(length: number): Int32Array {
    const array = this.array.length === length ? this.array : new Int32Array(length);
    this.array = new Int32Array(0);
    this.touched = 0;
    return array;
  }
}
