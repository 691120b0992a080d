// What the owner and the writer of the network-namespace WRITE test agree on.

export const MEBIBYTE = 1 << 20;

/** The pattern seed of the mebibyte the `write`-th WRITE fills (never 0: a zeroed bank holds no pattern). */
export function seedOfWrite(write: number): number {
  return write + 1;
}
