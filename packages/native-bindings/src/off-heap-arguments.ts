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

/** A pointer parameter of a bound function: its position, and whether the function may write through it. */
export interface PointerParameter {
  readonly index: number;
  readonly written: boolean;
}

/** The pointer parameters a C prototype declares; a `const` one is read only. */
export function pointerParameters(prototype: string): PointerParameter[] {
  const list = prototype.slice(prototype.indexOf('(') + 1, prototype.lastIndexOf(')')).trim();
  if (list === 'void' || list === '') return [];
  return list
    .split(',')
    .map((parameter, index) => ({ parameter: parameter.trim(), index }))
    .filter(({ parameter }) => parameter.includes('*'))
    .map(({ parameter, index }) => ({ index, written: !parameter.startsWith('const ') }));
}

/**
 * Wraps a koffi-bound function so that no typed array is moved off V8's heap during the call.
 *
 * koffi asks for each typed array argument's memory inside the call; a small one (the facade's one-element
 * out-parameters, short block or region lists) then gets an ArrayBuffer of its own, which V8 counts as new
 * external memory. While the views of banks keep external memory above V8's limit, each such count runs a
 * garbage-collection step (up to a whole mark-compact, several milliseconds) inside the native call.
 * Small arguments are therefore copied into slots of one ArrayBuffer allocated with the wrapper, and back
 * after the call where the function may write through them, through views of those slots the wrapper
 * keeps from call to call. Only the `pointers` parameters are looked at: this runs on every native call
 * (several per posted operation), so it does no work for the others.
 */
export function withOffHeapArguments<F extends (...args: never[]) => unknown>(
  native: F,
  pointers: readonly PointerParameter[],
): F {
  const slots = new ArrayBuffer(Math.max(1, pointers.length) * MAX_ON_HEAP_BYTES);
  // Per pointer parameter, the view of its slot last handed over (and its type), reused while the
  // arguments keep their type and length (a call's out-parameters and region tables usually do), and
  // the caller's array it stands for during a call.
  const views: (TypedArray | undefined)[] = pointers.map(() => undefined);
  const tags: (string | undefined)[] = pointers.map(() => undefined);
  const originals: (TypedArray | undefined)[] = pointers.map(() => undefined);
  const call = native as unknown as (...args: unknown[]) => unknown;
  const wrapped = (...args: unknown[]) => {
    let moved = false;
    for (let k = 0; k < pointers.length; k++) {
      const { index } = pointers[k] as PointerParameter;
      const argument = args[index];
      if (!ArrayBuffer.isView(argument)) continue;
      const bytes = argument.byteLength;
      if (bytes === 0 || bytes > MAX_ON_HEAP_BYTES) continue;
      const original = argument as TypedArray;
      const tag = original[Symbol.toStringTag];
      const constructor = constructors[tag];
      if (constructor === undefined) continue;
      let slot = views[k];
      if (slot === undefined || tags[k] !== tag || slot.length !== original.length) {
        slot = new constructor(slots, k * MAX_ON_HEAP_BYTES, original.length);
        views[k] = slot;
        tags[k] = tag;
      }
      copyElements(original, slot);
      originals[k] = original;
      args[index] = slot;
      moved = true;
    }
    if (!moved) return call(...args);
    try {
      return call(...args);
    } finally {
      for (let k = 0; k < pointers.length; k++) {
        const original = originals[k];
        if (original === undefined) continue;
        if ((pointers[k] as PointerParameter).written) copyElements(views[k] as TypedArray, original);
        originals[k] = undefined;
      }
    }
  };
  return wrapped as unknown as F;
}

/** `to.set(from)` for two arrays of one type and length: element by element, which for a few elements is several times faster. */
function copyElements(from: TypedArray, to: TypedArray): void {
  const target = to as Uint8Array;
  const source = from as Uint8Array;
  for (let i = 0; i < source.length; i++) target[i] = source[i] as number;
}
