import { describe, expect, it } from 'vitest';
import { printable } from './printable.js';

describe('printable', () => {
  it('writes C0, DEL and C1 control characters as JSON escapes and leaves other text as it is', () => {
    expect(printable('a\u001b[31m\nb\tc')).toBe('a\\u001b[31m\\nb\\tc');
    expect(printable('\u007f\u0080\u009b')).toBe('\\u007f\\u0080\\u009b');
    expect(printable('plain «text» ✓')).toBe('plain «text» ✓');
  });
});
