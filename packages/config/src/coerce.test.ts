import { describe, expect, it } from 'vitest';
import { coerceText } from './coerce.js';

const boolean = { type: 'boolean' };
const integer = { type: 'integer', minimum: 1 };
const number = { type: 'number' };
const list = { type: 'array', items: { type: 'string' } };
const numberList = { type: 'array', items: { type: 'number' } };

describe('coerceText', () => {
  it('reads booleans as true|false|1|0 and nothing else', () => {
    expect(coerceText('true', boolean)).toEqual({ ok: true, value: true });
    expect(coerceText('1', boolean)).toEqual({ ok: true, value: true });
    expect(coerceText('false', boolean)).toEqual({ ok: true, value: false });
    expect(coerceText('0', boolean)).toEqual({ ok: true, value: false });
    for (const text of ['yes', 'TRUE', 'on', '', ' true']) {
      const coerced = coerceText(text, boolean);
      expect(coerced.ok).toBe(false);
      if (!coerced.ok) expect(coerced.reason).toContain(`cannot read ${JSON.stringify(text)} as a boolean`);
    }
  });

  it('reads decimal numbers, leaving the rule (integer, bounds) to the schema', () => {
    expect(coerceText('16', integer)).toEqual({ ok: true, value: 16 });
    expect(coerceText('1.5', integer)).toEqual({ ok: true, value: 1.5 });
    expect(coerceText('-0.25', number)).toEqual({ ok: true, value: -0.25 });
    expect(coerceText('1e3', number)).toEqual({ ok: true, value: 1000 });
    expect(coerceText('.5', number)).toEqual({ ok: true, value: 0.5 });
  });

  it('refuses what Number() would quietly accept', () => {
    for (const text of ['', ' ', ' 5', '0x10', 'Infinity', 'NaN', '5ms', '1,000']) {
      const coerced = coerceText(text, number);
      expect(coerced.ok, text).toBe(false);
      if (!coerced.ok) expect(coerced.reason).toContain('numbers decimal');
    }
  });

  it('splits lists on commas, trims items and reads each by the item type', () => {
    expect(coerceText('http://a:1, http://b:2', list)).toEqual({ ok: true, value: ['http://a:1', 'http://b:2'] });
    expect(coerceText('', list)).toEqual({ ok: true, value: [] });
    expect(coerceText('1,2.5', numberList)).toEqual({ ok: true, value: [1, 2.5] });
    expect(coerceText('1,two', numberList).ok).toBe(false);
  });

  it('passes strings and choices through unchanged', () => {
    expect(coerceText('ucx', { type: 'string', enum: ['ucx', 'loopback'] })).toEqual({ ok: true, value: 'ucx' });
    expect(coerceText(' spaced ', { type: 'string' })).toEqual({ ok: true, value: ' spaced ' });
  });
});
