import { describe, expect, it } from 'vitest';
import { describeValue } from './describe-value.js';

describe('describeValue', () => {
  it('renders NaN, ±Infinity and bigints as themselves, never as JSON null', () => {
    expect(describeValue(Number.NaN)).toBe('NaN');
    expect(describeValue(Number.POSITIVE_INFINITY)).toBe('Infinity');
    expect(describeValue(Number.NEGATIVE_INFINITY)).toBe('-Infinity');
    expect(describeValue(5n)).toBe('5n');
    expect(describeValue(-1.5)).toBe('-1.5');
  });

  it('renders them the same way inside arrays and objects, undefined properties included', () => {
    expect(describeValue({ at: Number.NaN, blocks: [1n, Number.NEGATIVE_INFINITY], seen: undefined })).toBe(
      '{"at":NaN,"blocks":[1n,-Infinity],"seen":undefined}',
    );
    expect(describeValue([{ deadlineMs: Number.POSITIVE_INFINITY }, null, true])).toBe(
      '[{"deadlineMs":Infinity},null,true]',
    );
    expect(describeValue({ aborted: true })).toBe('{"aborted":true}');
    expect(describeValue([])).toBe('[]');
  });

  it('quotes strings and cuts long ones, sizes byte arrays, names functions and survives cycles', () => {
    expect(describeValue('ucx')).toBe('"ucx"');
    expect(describeValue('x'.repeat(100))).toBe(`"${'x'.repeat(80)}…"`);
    expect(describeValue(new Uint8Array(16))).toBe('Uint8Array(16 bytes)');
    expect(describeValue({ bytes: new BigUint64Array(2) })).toBe('{"bytes":BigUint64Array(16 bytes)}');
    expect(describeValue(() => 1)).toBe('a function');
    expect(describeValue(undefined)).toBe('undefined');
    expect(describeValue(new Date(0))).toBe('"1970-01-01T00:00:00.000Z"');
    const cycle: { name: string; self?: unknown } = { name: 'a' };
    cycle.self = cycle;
    expect(describeValue(cycle)).toBe('{"name":"a","self":[circular]}');
  });

  it('escapes control characters in strings and property names, DEL and C1 included', () => {
    expect(describeValue('a\u001b[31mred\nnext')).toBe('"a\\u001b[31mred\\nnext"');
    expect(describeValue('del\u007f csi\u009b')).toBe('"del\\u007f csi\\u009b"');
    expect(describeValue({ 'k\u009b2J': 'v\r' })).toBe('{"k\\u009b2J":"v\\r"}');
  });

  it('shows the first 16 elements or properties of a long array or object, then how many more', () => {
    const numbers = Array.from({ length: 100 }, (_, i) => i);
    expect(describeValue(numbers)).toBe(`[${numbers.slice(0, 16).join(',')},…(84 more)]`);
    expect(describeValue(numbers.slice(0, 16))).toBe(`[${numbers.slice(0, 16).join(',')}]`);
    const wide = Object.fromEntries(numbers.map((i) => [`k${i}`, i]));
    expect(describeValue({ wide })).toBe(
      `{"wide":{${numbers
        .slice(0, 16)
        .map((i) => `"k${i}":${i}`)
        .join(',')},…(84 more)}}`,
    );
  });
});
