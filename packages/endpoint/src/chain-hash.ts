// A block's chain hash as the endpoint takes it from its callers: an unsigned 64-bit bigint.

const maxChainHash = (1n << 64n) - 1n;

/** Whether `value` is a chain hash: a bigint of 0 to 2^64 - 1. */
export function isChainHash(value: unknown): value is bigint {
  return typeof value === 'bigint' && value >= 0n && value <= maxChainHash;
}
