import { describe, expect, it } from 'vitest';
import { transportGroup } from '../test/sample-groups.js';
import { describeGroup, describeValueRule, formatValue } from './descriptions.js';

describe('describeGroup', () => {
  it("describes a group's rules by the settings' code paths", () => {
    expect(describeGroup(transportGroup).rules.map(({ setting, related }) => [setting, related])).toEqual([
      ['transport.abandonTimeoutMs', ['transport.operationTimeoutMs']],
      ['transport.shutdownDeadlineMs', ['transport.abandonTimeoutMs']],
    ]);
  });
});

describe('describeValueRule and formatValue', () => {
  it('words bounds, choices and lists', () => {
    expect(describeValueRule({ type: 'number', maximum: 3 })).toBe('number ≤ 3');
    expect(describeValueRule({ type: 'string' })).toBe('string');
    expect(describeValueRule({ type: 'string', minLength: 1 })).toBe('non-empty string');
    expect(describeValueRule({ type: 'array', items: { type: 'integer' } })).toBe('list of integer');
    expect(describeValueRule({})).toBe('any value');
  });

  it('writes lists comma-separated, as env and argv take them', () => {
    expect(formatValue(['http://a:1', 'http://b:2'])).toBe('http://a:1,http://b:2');
    expect(formatValue(false)).toBe('false');
    expect(formatValue('')).toBe('""');
  });

  it('escapes control characters, as in setting names, so that a value stays one line', () => {
    expect(formatValue('\u001b[31mred\nnext')).toBe('\\u001b[31mred\\nnext');
    expect(formatValue(['a\u009bb', 'c'])).toBe('a\\u009bb,c');
  });
});
