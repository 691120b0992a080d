import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { transport } from '../test/support/backends.js';
import { openLibrary } from './library.js';
import { MAX_ON_HEAP_BYTES, withOffHeapArguments } from './off-heap-arguments.js';

/**
 * The bytes V8 newly counts as external memory when `array`'s memory is asked for now: its byte length
 * while it is still inside V8's heap, 0 once it has an ArrayBuffer of its own.
 */
function movedOffHeapNow(array: ArrayBufferView): number {
  const before = getHeapStatistics().external_memory;
  void array.buffer;
  return getHeapStatistics().external_memory - before;
}

describe('withOffHeapArguments', () => {
  it('hands small typed arrays over as copies and copies them back, leaving the originals on the heap', () => {
    const seen: unknown[] = [];
    const native = (input: Uint32Array, output: BigUint64Array, count: number, large: Uint8Array) => {
      seen.push(input, output, large);
      output[0] = BigInt((input[0] ?? 0) + (input[1] ?? 0) + count);
      large[0] = 9;
      return 'returned';
    };
    const input = Uint32Array.of(3, 4);
    const output = new BigUint64Array(1);
    const large = new Uint8Array(MAX_ON_HEAP_BYTES + 1);
    expect(withOffHeapArguments(native, 4)(input, output, 5, large)).toBe('returned');

    expect([output[0], large[0]]).toEqual([12n, 9]);
    expect(seen[0]).not.toBe(input);
    expect(seen[1]).not.toBe(output);
    expect(seen[2]).toBe(large); // allocated off the heap already: passed as it is
    expect([movedOffHeapNow(input), movedOffHeapNow(output)]).toEqual([input.byteLength, output.byteLength]);
  });

  it('is how the library binds every function: its out-parameters stay on the heap through a native call', () => {
    const library = openLibrary(transport.libraryPath);
    const version = [new Uint32Array(1), new Uint32Array(1), new Uint32Array(1)] as const;
    expect(library.api.kvt_version(...version)).toBe(0);

    expect(version.map((part) => part[0]).join('.')).toBe(library.api.kvt_version_string().split(' ')[0]);
    expect(version.map(movedOffHeapNow)).toEqual([4, 4, 4]);
  });
});
