/**
 * Deterministic contents for a bank: 32-bit words derived from their index and a seed, so a reader can
 * check every byte it received without holding a second copy.
 */
export function fillPattern(target: Uint8Array, seed: number): void {
  const words = new Uint32Array(target.buffer, target.byteOffset, target.byteLength >>> 2);
  for (let i = 0; i < words.length; i++) words[i] = Math.imul(i ^ seed, 0x9e3779b1) + seed;
}

/** Byte offset of the first word that differs from the pattern (at `sourceOffset` of the source bank), or -1. */
export function findPatternMismatch(actual: Uint8Array, seed: number, sourceOffset = 0): number {
  const words = new Uint32Array(actual.buffer, actual.byteOffset, actual.byteLength >>> 2);
  const first = sourceOffset >>> 2;
  for (let i = 0; i < words.length; i++) {
    const index = first + i;
    if (words[i] !== (Math.imul(index ^ seed, 0x9e3779b1) + seed) >>> 0) return i * 4;
  }
  return -1;
}

/** Descriptors that move `count` pieces of `pieceBytes` from bank 0 to bank 0 at the same offsets, last piece first. */
export function piecewiseDescriptors(count: number, pieceBytes: number, firstOffset = 0) {
  const descriptors = {
    sourceBank: new Uint32Array(count),
    sourceOffset: new BigUint64Array(count),
    destinationBank: new Uint32Array(count),
    destinationOffset: new BigUint64Array(count),
    length: new BigUint64Array(count).fill(BigInt(pieceBytes)),
  };
  for (let i = 0; i < count; i++) {
    const offset = BigInt(firstOffset + (count - 1 - i) * pieceBytes);
    descriptors.sourceOffset[i] = offset;
    descriptors.destinationOffset[i] = offset;
  }
  return descriptors;
}

/** Whether every byte of `bytes` is `value` (compared a mebibyte at a time, not byte by byte in JS). */
export function isFilledWith(bytes: Uint8Array, value: number): boolean {
  const chunk = Buffer.alloc(Math.min(bytes.length, 1 << 20), value);
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let offset = 0; offset < view.length; offset += chunk.length) {
    const part = view.subarray(offset, offset + chunk.length);
    if (!part.equals(chunk.subarray(0, part.length))) return false;
  }
  return true;
}
