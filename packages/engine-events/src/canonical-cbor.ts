import { EngineEventsInputError } from './errors.js';

/** The values `encodeCanonicalCbor` writes: what vLLM's block hash inputs are made of. */
export type CborValue = null | boolean | number | bigint | string | Uint8Array | readonly CborValue[];

const maxUint64 = (1n << 64n) - 1n;

/**
 * Canonical CBOR (RFC 8949 §4.2.1, as Python's cbor2 writes with `canonical=True`) of integers,
 * byte strings, text strings, arrays, null and booleans: every length and integer in its shortest
 * head. Integers beyond 64 bits, floats, maps and other types are refused (vLLM's block hash inputs
 * have none of them).
 */
export function encodeCanonicalCbor(value: CborValue): Uint8Array {
  const out: number[] = [];
  write(out, value, 'value', new Set());
  return Uint8Array.from(out);
}

function head(out: number[], major: number, argument: bigint | number): void {
  const n = BigInt(argument);
  const m = major << 5;
  if (n < 24n) out.push(m | Number(n));
  else if (n < 0x100n) out.push(m | 24, Number(n));
  else if (n < 0x10000n) out.push(m | 25, Number(n >> 8n), Number(n & 0xffn));
  else if (n < 0x100000000n) {
    out.push(m | 26);
    for (let shift = 24n; shift >= 0n; shift -= 8n) out.push(Number((n >> shift) & 0xffn));
  } else {
    out.push(m | 27);
    for (let shift = 56n; shift >= 0n; shift -= 8n) out.push(Number((n >> shift) & 0xffn));
  }
}

function writeInteger(out: number[], value: bigint, path: string): void {
  if (value >= 0n && value <= maxUint64) head(out, 0, value);
  else if (value < 0n && -1n - value <= maxUint64) head(out, 1, -1n - value);
  else throw new EngineEventsInputError(path, value, 'an integer is within ±2^64 (no CBOR bignums)');
}

/** `arrays`: the arrays `value` is inside of, so that an array holding itself is refused, not recursed into forever. */
function write(out: number[], value: CborValue, path: string, arrays: Set<readonly CborValue[]>): void {
  if (value === null) out.push(0xf6);
  else if (value === true) out.push(0xf5);
  else if (value === false) out.push(0xf4);
  else if (typeof value === 'bigint') writeInteger(out, value, path);
  else if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new EngineEventsInputError(path, value, 'a number is a safe integer');
    writeInteger(out, BigInt(value), path);
  } else if (typeof value === 'string') {
    const bytes = new TextEncoder().encode(value);
    head(out, 3, bytes.length);
    for (const byte of bytes) out.push(byte);
  } else if (value instanceof Uint8Array) {
    head(out, 2, value.length);
    for (const byte of value) out.push(byte);
  } else if (Array.isArray(value)) {
    if (arrays.has(value)) throw new EngineEventsInputError(path, value, 'an array does not hold itself');
    arrays.add(value);
    head(out, 4, value.length);
    // A loop, not forEach: a hole is read as undefined and refused, never left out of an array its head counts.
    for (let i = 0; i < value.length; i++) write(out, value[i] as CborValue, `${path}[${i}]`, arrays);
    arrays.delete(value);
  } else {
    throw new EngineEventsInputError(
      path,
      value,
      'a CBOR value here is null, a boolean, an integer, bytes, text or an array',
    );
  }
}
