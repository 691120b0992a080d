import { describe, expect, it } from 'vitest';
import { coerceText, writtenNumbersProblem } from './coerce.js';

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

  it('refuses a number that would not be the one written, saying what it would be', () => {
    for (const [text, schema, becomes] of [
      ['0.99999999999999999', number, '1'],
      ['1.0000000000000001', integer, '1'],
      ['9007199254740993', number, '9007199254740992'],
      ['1e-400', number, '0'],
      ['1e400', number, 'Infinity'],
    ] as const) {
      const coerced = coerceText(text, schema);
      expect(coerced, text).toEqual({
        ok: false,
        reason: `cannot read ${JSON.stringify(text)} as a number without changing it: it would be ${becomes} (a number keeps 15 significant digits, between 1e-307 and 1e308 in size)`,
      });
    }
    expect(coerceText('2,0.30000000000000001', numberList).ok).toBe(false);
  });

  it('refuses an integer past Number.MAX_SAFE_INTEGER, which a number holds exactly but not its neighbours', () => {
    for (const text of ['9007199254740992', '-1e20']) {
      expect(coerceText(text, integer)).toEqual({
        ok: false,
        reason: `cannot read ${JSON.stringify(text)} as an integer exactly: past 9007199254740991, the largest a number holds exactly with every integer below it`,
      });
    }
    expect(coerceText('9007199254740991', integer)).toEqual({ ok: true, value: Number.MAX_SAFE_INTEGER });
    expect(coerceText('9007199254740992', number)).toEqual({ ok: true, value: 2 ** 53 });
  });

  it('reads every number a double holds as written, however it is written', () => {
    for (const [text, value] of [
      ['0.1', 0.1],
      ['1.50', 1.5],
      ['100e-2', 1],
      ['0.30000000000000004', 0.1 + 0.2],
      ['5e-324', Number.MIN_VALUE],
      ['1e21', 1e21],
      ['-0', -0],
      ['000.000', 0],
    ] as const) {
      expect(coerceText(text, number), text).toEqual({ ok: true, value });
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

describe('writtenNumbersProblem', () => {
  it('holds the decimals a file wrote, its list items included, to the rule of env and argv numbers', () => {
    expect(writtenNumbersProblem(['1.50', '2e3'], number)).toBeUndefined();
    expect(writtenNumbersProblem(['1', '1e-400'], numberList)).toBe(
      'cannot read "1e-400" as a number without changing it: it would be 0 (a number keeps 15 significant digits, between 1e-307 and 1e308 in size)',
    );
    expect(writtenNumbersProblem(['9007199254740992'], integer)).toBe(
      'cannot read "9007199254740992" as an integer exactly: past 9007199254740991, the largest a number holds exactly with every integer below it',
    );
  });

  it('holds YAML hexadecimal and octal integers to the same rule, quoting them as written', () => {
    expect(writtenNumbersProblem(['0x1F', '0o17', '0x20000000000002'], numberList)).toBeUndefined();
    expect(writtenNumbersProblem(['0x1F', '0x20000000000001'], numberList)).toBe(
      'cannot read "0x20000000000001" as a number without changing it: it would be 9007199254740992 (9007199254740993 as written; a number holds every integer up to 9007199254740991 exactly)',
    );
    expect(writtenNumbersProblem(['0o400000000000000001'], number)).toBe(
      'cannot read "0o400000000000000001" as a number without changing it: it would be 9007199254740992 (9007199254740993 as written; a number holds every integer up to 9007199254740991 exactly)',
    );
    expect(writtenNumbersProblem(['0x20000000000000'], integer)).toBe(
      'cannot read "0x20000000000000" as an integer exactly: past 9007199254740991, the largest a number holds exactly with every integer below it',
    );
  });

  it('leaves .inf and .nan to the setting’s schema', () => {
    expect(writtenNumbersProblem(['.inf', '-.Inf', '.nan'], numberList)).toBeUndefined();
  });
});
