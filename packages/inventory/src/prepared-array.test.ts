import { describe, expect, test } from 'vitest';
import { PreparedArray } from './prepared-array.js';

describe('PreparedArray', () => {
  test('hands over the array it prepared, zeroed, and forgets it', () => {
    const prepared = new PreparedArray();
    expect(prepared.byteLength).toBe(0);
    for (let page = 0; page < 5; page++) prepared.touch(3_000);
    expect(prepared.byteLength).toBe(12_000);
    const array = prepared.take(3_000);
    expect(array).toHaveLength(3_000);
    expect(array.every((word) => word === 0)).toBe(true);
    expect(prepared.byteLength).toBe(0);
    // Taken again without preparing: a new array.
    const fresh = prepared.take(3_000);
    expect(fresh).not.toBe(array);
    expect(fresh).toHaveLength(3_000);
  });

  test('a length other than the prepared one gets a new array; touching another length starts over', () => {
    const prepared = new PreparedArray();
    prepared.touch(2_048);
    expect(prepared.take(4_096)).toHaveLength(4_096);
    prepared.touch(2_048);
    prepared.touch(6_144);
    expect(prepared.byteLength).toBe(6_144 * 4);
    expect(prepared.take(6_144)).toHaveLength(6_144);
  });
});
