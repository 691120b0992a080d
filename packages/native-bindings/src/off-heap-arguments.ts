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
 * after the call (out-parameters), through views of those slots the wrapper keeps from call to call.
 */
export function withOffHeapArguments<F extends (...args: never[]) => unknown>(native: F, parameterCount: number): F {
  const slots = new ArrayBuffer(parameterCount * MAX_ON_HEAP_BYTES);
  // Per parameter, the view of its slot last handed over, reused while the arguments keep their type and
  // length (a call's out-parameters and region tables usually do), and the caller's array it stands for.
  const views: (TypedArray | undefined)[] = new Array<TypedArray | undefined>(parameterCount).fill(undefined);
  const originals: (TypedArray | undefined)[] = new Array<TypedArray | undefined>(parameterCount).fill(undefined);
  const call = native as unknown as (...args: unknown[]) => unknown;
  const wrapped = (...args: unknown[]) => {
    const count = Math.min(args.length, parameterCount);
    for (let i = 0; i < count; i++) {
      const argument = args[i];
      if (!ArrayBuffer.isView(argument) || argument.byteLength === 0 || argument.byteLength > MAX_ON_HEAP_BYTES)
        continue;
      const constructor = constructors[(argument as TypedArray)[Symbol.toStringTag]];
      if (constructor === undefined) continue;
      const original = argument as TypedArray;
      let slot = views[i];
      if (slot === undefined || slot.constructor !== constructor || slot.length !== original.length) {
        slot = new constructor(slots, i * MAX_ON_HEAP_BYTES, original.length);
        views[i] = slot;
      }
      (slot as Uint8Array).set(original as Uint8Array);
      originals[i] = original;
      args[i] = slot;
    }
    try {
      return call(...args);
    } finally {
      for (let i = 0; i < count; i++) {
        const original = originals[i];
        if (original === undefined) continue;
        (original as Uint8Array).set(views[i] as Uint8Array);
        originals[i] = undefined;
      }
    }
  };
  return wrapped as unknown as F;
}
