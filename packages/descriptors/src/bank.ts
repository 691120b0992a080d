/** The wire form of a bank of a rank part, and the integer fields rank parts share. */
import { z } from 'zod';
import { oneOfRule } from './field-issue.js';

export const U64_LIMIT = 2n ** 64n;
/** Offsets inside a bank are planned as JavaScript numbers, so a bank's block span stays below 2^53. */
export const SPAN_LIMIT = BigInt(Number.MAX_SAFE_INTEGER);

const decimalRule = 'must be an unsigned integer as a decimal string';
export const u64Rule = 'must be an unsigned 64-bit bigint';

/** A 64-bit unsigned quantity: a decimal string on the wire, a bigint once parsed. */
const u64 = z.codec(
  z.string({ error: decimalRule }).regex(/^(0|[1-9][0-9]*)$/, decimalRule),
  z
    .bigint({ error: u64Rule })
    .min(0n, u64Rule)
    .max(U64_LIMIT - 1n, 'must fit in 64 bits'),
  { decode: (text) => BigInt(text), encode: (value) => value.toString() },
);

export const countRule = 'must be an integer in [0, 2^31)';
export const count = z
  .int({ error: countRule })
  .min(0, countRule)
  .max(2 ** 31 - 1, countRule);
export const positiveCountRule = 'must be a positive integer below 2^31';
export const positiveCount = z
  .int({ error: positiveCountRule })
  .min(1, positiveCountRule)
  .max(2 ** 31 - 1, positiveCountRule);

export const memKinds = ['dram', 'vram'] as const;
export type MemKind = (typeof memKinds)[number];

export const bankSchema = z.strictObject(
  {
    memKind: z.enum(memKinds, { error: oneOfRule(memKinds) }),
    /** GPU ordinal for `vram`, NUMA node for `dram`. */
    deviceId: count,
    address: u64,
    bytes: u64,
    blocks: positiveCount,
    blockStride: u64,
    /**
     * Version 2, layer-separate only: the bank holds every plane of one layer, plane p of block b at
     * `b × blockStride + p × planeStride`.
     */
    planeStride: u64.optional(),
  },
  { error: 'must be a bank object' },
);

export type Bank = z.output<typeof bankSchema>;
