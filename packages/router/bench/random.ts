// The benchmarks' random numbers: xorshift32 from a fixed seed, so that every run measures the same workload.
let state = 0x2545f491;

export function random32(): number {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return state >>> 0;
}

/** A whole number from 0 to n − 1. */
export const below = (n: number): number => random32() % n;
