import { describe, expect, it } from 'vitest';
import { blocksOutermost, DescriptorWriter } from './descriptor-writer.js';

describe('DescriptorWriter', () => {
  it('extends a range only when it continues in both banks, and writes 64-bit offsets and lengths exactly', () => {
    const writer = new DescriptorWriter(5, true);
    const high = 2 ** 40 + 8;
    writer.add(0, 1, high, 0, 8);
    writer.add(0, 1, high + 8, 8, 8); // continues both: merged
    writer.add(0, 2, high + 16, 16, 8); // other destination bank
    writer.add(0, 2, high + 32, 24, 8); // source gap
    writer.add(0, 2, high + 40, 40, 2 ** 33); // destination gap
    const written = writer.finish();
    expect(written.count).toBe(4);
    expect([...written.sourceBank, ...written.destinationBank]).toEqual([0, 0, 0, 0, 1, 2, 2, 2]);
    expect([...written.sourceOffset]).toEqual([2n ** 40n + 8n, 2n ** 40n + 24n, 2n ** 40n + 40n, 2n ** 40n + 48n]);
    expect([...written.destinationOffset]).toEqual([0n, 16n, 24n, 40n]);
    expect([...written.length]).toEqual([16n, 8n, 8n, 2n ** 33n]);
  });

  it('writes every range as its own descriptor without coalescing', () => {
    const writer = new DescriptorWriter(2, false);
    writer.add(0, 0, 0, 0, 4);
    writer.add(0, 0, 4, 4, 4);
    expect(writer.finish().count).toBe(2);
  });
});

describe('blocksOutermost', () => {
  it('holds when every route of a pair lies in one bank on each side', () => {
    expect(blocksOutermost([0, 0, 0], [2, 2, 2])).toBe(true);
    expect(blocksOutermost([0, 0], [0, 1])).toBe(false);
    expect(blocksOutermost([3], [4])).toBe(true);
  });
});
