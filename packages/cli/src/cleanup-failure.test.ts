import { describe, expect, it } from 'vitest';
import { keepCleanupFailure } from './cleanup-failure.js';
import { CleanupFailedError, UsageError } from './errors.js';

const cleanupFailure = new Error('the store failed to close');

describe('keepCleanupFailure', () => {
  it('keeps the cleanup failure as the cause of the error itself', () => {
    const error = new Error('the start failed');
    expect(keepCleanupFailure(error, cleanupFailure, 'abandoning the publishing')).toBe(error);
    expect(error.cause).toBe(cleanupFailure);
  });

  it('wraps a thrown value that is not an Error in a CleanupFailedError carrying both', () => {
    const kept = keepCleanupFailure('refused', cleanupFailure, 'abandoning the publishing');
    expect(kept).toBeInstanceOf(CleanupFailedError);
    expect(kept).toMatchObject({
      code: 'CLEANUP_FAILED',
      exitCode: 1,
      thrown: 'refused',
      cleanupFailure,
      cause: 'refused',
      message: 'refused; and abandoning the publishing after it failed: the store failed to close',
    });
  });

  it('wraps a frozen error, left as it was, in a CleanupFailedError that ends the binary as it would have', () => {
    const frozen = Object.freeze(new UsageError('serve', 'the port is taken'));
    const kept = keepCleanupFailure(frozen, cleanupFailure, 'closing the agent');
    expect(kept).toBeInstanceOf(CleanupFailedError);
    expect(kept).toMatchObject({ thrown: frozen, cleanupFailure, cause: frozen, exitCode: 2 });
    expect((kept as Error).message).toBe(
      `${frozen.message}; and closing the agent after it failed: the store failed to close`,
    );
    expect(frozen.cause).toBeUndefined();
  });
});
