// What keeps a native call from moving a small typed array off V8's heap is that the array never reaches
// koffi: the wrapper hands over a view of its own preallocated slots instead, and copies back after
// the call. Both are proven by identity and contents, not by V8's process-wide external-memory counter,
// which any collection moves.
import { describe, expect, it } from 'vitest';
import { transport } from '../test/support/backends.js';
import { openLibrary } from './library.js';
import { MAX_ON_HEAP_BYTES, pointerParameters, withOffHeapArguments } from './off-heap-arguments.js';

/** A native function that records what it is handed, writes its out-parameters, and returns. */
function recordingNative() {
  const calls: unknown[][] = [];
  const native = (input: Uint32Array, output: BigUint64Array, count: number, large: Uint8Array) => {
    calls.push(
      [input, output, count, large].map((argument) =>
        ArrayBuffer.isView(argument) ? { view: argument, contents: Array.from(argument as Uint8Array) } : argument,
      ),
    );
    output[0] = BigInt((input[0] ?? 0) + (input[1] ?? 0) + count);
    large[0] = 9;
    return 'returned';
  };
  return { native, calls };
}

type Seen = { view: ArrayBufferView; contents: unknown[] };

describe('withOffHeapArguments', () => {
  it('hands small typed arrays over as views of slots it allocated once, with their contents, and copies them back', () => {
    const { native, calls } = recordingNative();
    const call = withOffHeapArguments(
      native,
      pointerParameters('int f(const uint32_t *input, uint64_t *output, uint32_t count, uint8_t *large)'),
    );
    const input = Uint32Array.of(3, 4);
    const output = new BigUint64Array(1);
    const large = new Uint8Array(MAX_ON_HEAP_BYTES + 1);
    expect(call(input, output, 5, large)).toBe('returned');
    expect(call(Uint32Array.of(1, 1), output, 0, large)).toBe('returned');

    expect([output[0], large[0]]).toEqual([2n, 9]);
    const [first, second] = calls as [Seen[], Seen[]];
    const [seenInput, seenOutput, count, seenLarge] = first;
    // Neither original reaches the native function: views of the wrapper's one buffer do, in their own slots.
    expect(seenInput!.view).not.toBe(input);
    expect(seenOutput!.view).not.toBe(output);
    expect(seenInput!.view.buffer).toBe(seenOutput!.view.buffer);
    expect([seenInput!.view.byteOffset, seenOutput!.view.byteOffset]).toEqual([0, MAX_ON_HEAP_BYTES]);
    expect(seenInput!.contents).toEqual([3, 4]);
    expect(count).toBe(5);
    // A second call of the same shapes gets the very same views of the same slots: it allocates none.
    expect(second[0]!.view).toBe(seenInput!.view);
    expect(second[1]!.view).toBe(seenOutput!.view);
    expect(second[0]!.contents).toEqual([1, 1]);
    // An array too large to live on the heap is passed as it is.
    expect(seenLarge!.view).toBe(large);
  });

  it('hands an argument of another type or length over as a view of its slot of that shape, contents and all', () => {
    const seen: { view: ArrayBufferView; contents: number[] }[] = [];
    const call = withOffHeapArguments(
      (view: ArrayBufferView) => seen.push({ view, contents: Array.from(view as Uint8Array) }),
      [{ index: 0, written: true }],
    );
    call(Uint32Array.of(1, 2));
    call(Uint32Array.of(3, 4, 5));
    call(Uint16Array.of(6));
    expect(seen.map(({ view, contents }) => [view.constructor, contents])).toEqual([
      [Uint32Array, [1, 2]],
      [Uint32Array, [3, 4, 5]],
      [Uint16Array, [6]],
    ]);
    expect(new Set(seen.map(({ view }) => view.buffer)).size).toBe(1);
    expect(seen.map(({ view }) => view.byteOffset)).toEqual([0, 0, 0]);
  });

  it('copies out-parameters back when the native call throws, and keeps no argument past the call', () => {
    const output = new BigUint64Array(1);
    const call = withOffHeapArguments((out: BigUint64Array) => {
      out[0] = 7n;
      throw new Error('refused');
    }, pointerParameters('int f(uint64_t *out)'));
    expect(() => call(output)).toThrow('refused');
    expect(output[0]).toBe(7n);
  });

  it('leaves an empty array, a DataView and arguments that are not pointer parameters as they are', () => {
    const seen: unknown[] = [];
    const call = withOffHeapArguments(
      (...args: unknown[]) => seen.push(...args),
      pointerParameters('void f(uint8_t *empty, uint8_t *view, uint32_t value)'),
    );
    const empty = new Uint8Array(0);
    const view = new DataView(new ArrayBuffer(4));
    const past = Uint8Array.of(1);
    call(empty, view, past);
    expect(seen).toEqual([empty, view, past]);
    expect(seen[0]).toBe(empty);
    expect(seen[1]).toBe(view);
    expect(seen[2]).toBe(past);
  });

  it('copies back only through the parameters the function may write, not its const ones', () => {
    const input = Uint32Array.of(1);
    const output = Uint32Array.of(1);
    const call = withOffHeapArguments((read: Uint32Array, written: Uint32Array) => {
      read[0] = 5;
      written[0] = 6;
    }, pointerParameters('void f(const uint32_t *read, uint32_t *written)'));
    call(input, output);
    expect([input[0], output[0]]).toEqual([1, 6]);
  });

  it('finds the pointer parameters of a prototype, and which of them are written', () => {
    expect(pointerParameters('int32_t f(uint32_t a, const uint8_t *b, uint64_t *out)')).toEqual([
      { index: 1, written: false },
      { index: 2, written: true },
    ]);
    expect(pointerParameters('const char *f(void)')).toEqual([]);
  });

  it('is how the library binds every function: its out-parameters go through the wrapper and come back filled', () => {
    const library = openLibrary(transport.libraryPath);
    // The wrapper names each small argument's type by its Symbol.toStringTag; koffi does not read it.
    let named = 0;
    const version = [new Uint32Array(1), new Uint32Array(1), new Uint32Array(1)].map((part) =>
      Object.defineProperty(part, Symbol.toStringTag, {
        get: () => {
          named++;
          return 'Uint32Array';
        },
      }),
    ) as [Uint32Array, Uint32Array, Uint32Array];
    expect(library.api.kvt_version(...version)).toBe(0);

    expect(named).toBe(3);
    expect(version.map((part) => part[0]).join('.')).toBe(library.api.kvt_version_string().split(' ')[0]);
  });
});
