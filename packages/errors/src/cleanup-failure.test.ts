import { describe, expect, it } from 'vitest';
import { CleanupFailedError, keepCleanupFailures } from './cleanup-failure.js';
import { codeOf, KvreuseError } from './kvreuse-error.js';

class PortTakenError extends KvreuseError<'PORT_TAKEN'> {
  readonly code = 'PORT_TAKEN';
}

const closeFailure = new Error('the store failed to close');
const releaseFailure = new Error('the bank was not released');

describe('keepCleanupFailures', () => {
  it('keeps one cleanup failure as the cause of an error that had none', () => {
    const error = new Error('the start failed');
    expect(keepCleanupFailures(error, 'closing the store', [closeFailure])).toBe(error);
    expect(error.cause).toBe(closeFailure);
  });

  it('keeps several cleanup failures on an error that had no cause in an AggregateError', () => {
    const error = new Error('the start failed');
    expect(keepCleanupFailures(error, 'closing what it opened', [closeFailure, releaseFailure])).toBe(error);
    expect(error.cause).toBeInstanceOf(AggregateError);
    expect(error.cause).toMatchObject({
      errors: [closeFailure, releaseFailure],
      message: 'closing what it opened after it failed: the store failed to close; the bank was not released',
    });
  });

  it("keeps the error's own cause first, in an AggregateError with the cleanup failures", () => {
    const ownCause = new Error('the agent did not answer');
    const error = new Error('the start failed', { cause: ownCause });
    expect(keepCleanupFailures(error, 'closing the store', [closeFailure])).toBe(error);
    expect(error.cause).toBeInstanceOf(AggregateError);
    expect(error.cause).toMatchObject({
      errors: [ownCause, closeFailure],
      message: 'the agent did not answer; and closing the store after it failed: the store failed to close',
    });
    const twice = new Error('the start failed', { cause: ownCause });
    keepCleanupFailures(twice, 'closing what it opened', [closeFailure, releaseFailure]);
    expect(twice.cause).toMatchObject({ errors: [ownCause, closeFailure, releaseFailure] });
  });

  it('wraps a frozen error, left as it was, in a CleanupFailedError carrying both', () => {
    const frozen = Object.freeze(new PortTakenError('the port is taken'));
    const kept = keepCleanupFailures(frozen, 'closing the agent', [closeFailure, releaseFailure]);
    expect(kept).toBeInstanceOf(CleanupFailedError);
    expect(kept).toMatchObject({
      code: 'CLEANUP_FAILED',
      thrown: frozen,
      undoing: 'closing the agent',
      cleanupFailures: [closeFailure, releaseFailure],
      cause: frozen,
      message:
        'the port is taken; and closing the agent after it failed: the store failed to close; the bank was not released',
    });
    expect(frozen.cause).toBeUndefined();
    expect(codeOf((kept as CleanupFailedError).thrown)).toBe('PORT_TAKEN');
  });

  it('wraps an error refusing a cause of its own in a CleanupFailedError', () => {
    const error = new Error('the start failed', { cause: 'fixed' });
    Object.defineProperty(error, 'cause', { configurable: false, writable: false });
    const kept = keepCleanupFailures(error, 'closing the store', [closeFailure]);
    expect(kept).toMatchObject({ thrown: error, cleanupFailures: [closeFailure] });
    expect(error.cause).toBe('fixed');
  });

  it('wraps an error whose cause cannot be read in a CleanupFailedError, the error left as it was', () => {
    const error = new Error('the start failed');
    const unreadable = {
      get() {
        throw new Error('no reading');
      },
      configurable: true,
    };
    Object.defineProperty(error, 'cause', unreadable);
    const kept = keepCleanupFailures(error, 'closing the store', [closeFailure]);
    expect(kept).toMatchObject({ thrown: error, cleanupFailures: [closeFailure] });
    expect(Object.getOwnPropertyDescriptor(error, 'cause')).toMatchObject({ get: unreadable.get });
  });

  it('wraps a thrown value that is not an Error in a CleanupFailedError carrying both', () => {
    const kept = keepCleanupFailures('refused', 'closing the store', [closeFailure]);
    expect(kept).toBeInstanceOf(CleanupFailedError);
    expect(kept).toMatchObject({
      name: 'CleanupFailedError',
      thrown: 'refused',
      cleanupFailures: [closeFailure],
      cause: 'refused',
      message: 'refused; and closing the store after it failed: the store failed to close',
    });
    expect(codeOf((kept as CleanupFailedError).thrown)).toBeUndefined();
  });

  it('returns the error as it is when no cleanup failed', () => {
    const error = new Error('the start failed');
    expect(keepCleanupFailures(error, 'closing the store', [])).toBe(error);
    expect('cause' in error).toBe(false);
    expect(keepCleanupFailures('refused', 'closing the store', [])).toBe('refused');
  });
});
