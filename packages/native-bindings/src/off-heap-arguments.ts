/**
 * V8 keeps a typed array of at most this many bytes inside its own heap until someone asks for its
 * memory (Node's default `--typed-array-max-size-in-heap`).
 */
export const MAX_ON_HEAP_BYTES = 64;

type TypedArray =
  | Uint8Array
  | Uint8ClampedArray
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | BigUint64Array
  | BigInt64Array
  | Float32Array
  | Float64Array;
type TypedArrayConstructor = new (buffer: ArrayBuffer, byteOffset: number, length: number) => TypedArray;

/** By `Symbol.toStringTag` (a Buffer's is `Uint8Array`). */
const constructors: Readonly<Record<string, TypedArrayConstructor>> = {
  Uint8Array,
  Uint8ClampedArray,
  Int8Array,
  Uint16Array,
  Int16Array,
  Uint32Array,
  Int32Array,
  BigUint64Array,
  BigInt64Array,
  Float32Array,
  Float64Array,
};

/**
 * Wraps a koffi-bound function so that no typed array is moved off V8's heap during the call.
 *
 * koffi asks for each typed array argument's memory inside the call; a small one (the facade's one-element
 * out-parameters, short block or region lists) then gets an ArrayBuffer of its own, which V8 counts as new
 * external memory. While the views of banks keep external memory above V8's limit, each such count runs a
 * garbage-collection step (up to a whole mark-compact, several milliseconds) inside the native call.
 * Small arguments are therefore copied into slots of one ArrayBuffer allocated with the wrapper, and back
 * after the call (out-parameters): the call allocates nothing.
 */
export function withOffHeapArguments<F extends (...args: never[]) => unknown>(native: F, parameterCount: number): F {
  const slots = new ArrayBuffer(parameterCount * MAX_ON_HEAP_BYTES);
  const call = native as unknown as (...args: unknown[]) => unknown;
  const wrapped = (...args: unknown[]) => {
    const copies: [TypedArray, TypedArray][] = [];
    for (let i = 0; i < args.length && i < parameterCount; i++) {
      const argument = args[i];
      if (!ArrayBuffer.isView(argument) || argument.byteLength === 0 || argument.byteLength > MAX_ON_HEAP_BYTES)
        continue;
      const constructor = constructors[(argument as TypedArray)[Symbol.toStringTag]];
      if (constructor === undefined) continue;
      const original = argument as TypedArray;
      const slot = new constructor(slots, i * MAX_ON_HEAP_BYTES, original.length);
      (slot as Uint8Array).set(original as Uint8Array);
      copies.push([original, slot]);
      args[i] = slot;
    }
    const result = call(...args);
    for (const [original, slot] of copies) (original as Uint8Array).set(slot as Uint8Array);
    return result;
  };
  return wrapped as unknown as F;
}
