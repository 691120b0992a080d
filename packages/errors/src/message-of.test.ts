import { describe, expect, it } from 'vitest';
import { causeSuffix, messageOf } from './message-of.js';

describe('messageOf', () => {
  it("is an Error's message, its subclasses' included", () => {
    expect(messageOf(new Error('disk full'))).toBe('disk full');
    expect(messageOf(new RangeError('too far'))).toBe('too far');
  });

  it('is anything else as String writes it', () => {
    expect(messageOf('refused')).toBe('refused');
    expect(messageOf(42)).toBe('42');
    expect(messageOf(undefined)).toBe('undefined');
    expect(messageOf({ code: 'EX' })).toBe('[object Object]');
  });

  it('does not throw for an Error whose message getter throws', () => {
    const error = new Error('hidden');
    Object.defineProperty(error, 'message', {
      get() {
        throw new Error('no reading');
      },
    });
    expect(messageOf(error)).toBe('an error whose message could not be read');
  });

  it('renders a value String refuses with describeValue', () => {
    const bare = Object.assign(Object.create(null) as object, { reason: 'gone' });
    expect(messageOf(bare)).toBe('{"reason":"gone"}');
  });

  it('does not throw for a value neither String nor describeValue can render', () => {
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('no reading');
        },
        ownKeys() {
          throw new Error('no listing');
        },
      },
    );
    expect(messageOf(hostile)).toBe('a value that could not be put in words');
  });
});

describe('causeSuffix', () => {
  it("is ': ' and the message of a cause that is an Error", () => {
    expect(causeSuffix(new Error('connection refused'))).toBe(': connection refused');
    expect(causeSuffix(new TypeError('not a number'))).toBe(': not a number');
  });

  it('is empty for no cause and for a cause that is not an Error', () => {
    expect(causeSuffix(undefined)).toBe('');
    expect(causeSuffix('refused')).toBe('');
    expect(causeSuffix({ message: 'looks like one' })).toBe('');
  });
});
