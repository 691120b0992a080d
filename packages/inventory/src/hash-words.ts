// Block hashes as the retained table keys them: two int32 words each (lo, hi), so that V8 never boxes
// a value above 2^31, and mixed into 32 bits to find a hash's home slot.

const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** murmur3's 32-bit finaliser over both halves of a hash. */
export function mix(lo: number, hi: number): number {
  let h = lo ^ Math.imul(hi, 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A chain's hashes as (lo, hi) pairs of 32-bit words, without copying on little-endian machines. */
export function hashWords(chain: BigUint64Array | readonly bigint[]): Int32Array {
  if (littleEndian && chain instanceof BigUint64Array) {
    return new Int32Array(chain.buffer, chain.byteOffset, chain.length * 2);
  }
  const words = new Int32Array(chain.length * 2);
  for (let i = 0; i < chain.length; i++) {
    const hash = chain[i]!;
    words[2 * i] = Number(hash & 0xffffffffn);
    words[2 * i + 1] = Number(hash >> 32n);
  }
  return words;
}
