import { describe, expect, it } from 'vitest';
import { codeOf, isKvreuseError, KvreuseError, KvreuseTypeError } from './kvreuse-error.js';
import { OptionError } from './option-error.js';

class SampleError extends KvreuseError<'SAMPLE'> {
  readonly code = 'SAMPLE';
}

class SampleOptionError extends OptionError<'INVALID_SAMPLE_OPTION'> {
  readonly code = 'INVALID_SAMPLE_OPTION';
  constructor(option: string, value: unknown, rule: string) {
    super('sample', option, value, rule);
  }
}

describe('KvreuseError', () => {
  it('names itself after its concrete class and keeps the cause', () => {
    const cause = new Error('underneath');
    const error = new SampleError('refused', { cause });
    expect(error.name).toBe('SampleError');
    expect(error.message).toBe('refused');
    expect(error.cause).toBe(cause);
    expect(error).toBeInstanceOf(Error);
  });

  it('is recognised by its brand, also when made by another copy of this module', () => {
    expect(isKvreuseError(new SampleError('x'))).toBe(true);
    const foreign = Object.assign(new Error('from another copy'), {
      code: 'FOREIGN',
      [Symbol.for('@kvreuse/errors/KvreuseError')]: true,
    });
    expect(isKvreuseError(foreign)).toBe(true);
    expect(codeOf(foreign)).toBe('FOREIGN');
  });

  it('gives no code for anything that is not a kvreuse error, even one with a code property', () => {
    expect(codeOf(new SampleError('x'))).toBe('SAMPLE');
    expect(codeOf(Object.assign(new Error('fs'), { code: 'ENOENT' }))).toBeUndefined();
    expect(codeOf('SAMPLE')).toBeUndefined();
    expect(codeOf(null)).toBeUndefined();
    expect(isKvreuseError({ code: 'SAMPLE' })).toBe(false);
  });
});

class SampleCallError extends KvreuseTypeError<'SAMPLE_CALL'> {
  readonly code = 'SAMPLE_CALL';
}

describe('KvreuseTypeError', () => {
  it('is a TypeError that carries the same brand and code', () => {
    const error = new SampleCallError('called with 5');
    expect(error).toBeInstanceOf(TypeError);
    expect(error.name).toBe('SampleCallError');
    expect(isKvreuseError(error)).toBe(true);
    expect(codeOf(error)).toBe('SAMPLE_CALL');
  });
});

describe('OptionError', () => {
  it('names the subject, the option, the value as given and the rule', () => {
    const error = new SampleOptionError('timeoutMs', Number.NaN, 'a finite number ≥ 0');
    expect(error.message).toBe('sample option timeoutMs = NaN is refused: a finite number ≥ 0');
    expect(error).toMatchObject({
      code: 'INVALID_SAMPLE_OPTION',
      subject: 'sample',
      option: 'timeoutMs',
      rule: 'a finite number ≥ 0',
    });
    expect(Number.isNaN(error.value)).toBe(true);
    expect(error.name).toBe('SampleOptionError');
  });
});
