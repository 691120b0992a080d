/**
 * A zeroed `Int32Array` of `words` words on a `SharedArrayBuffer` that no other thread ever sees.
 *
 * Why shared: V8 counts each new `ArrayBuffer`'s bytes toward starting a full collection (one per
 * 64 MiB or so), and a worker's record slab is reallocated every time it grows by a quarter, so
 * building a 10 M-block inventory allocated some 800 MB of slabs: 27 full collections instead of 8,
 * 3–5 ms each on a small virtual machine, each inside whichever `apply` met it. A
 * `SharedArrayBuffer`'s bytes are not counted that way. A dropped slab is freed by the next
 * collection, whatever starts it; reading and writing the array costs the same as on an `ArrayBuffer`.
 */
export function sharedWords(words: number): Int32Array {
  return new Int32Array(new SharedArrayBuffer(words * Int32Array.BYTES_PER_ELEMENT));
}
