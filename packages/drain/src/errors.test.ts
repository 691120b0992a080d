import { describe, expect, it } from 'vitest';
import { DrainingError, RetriesExhaustedError } from './index.js';

describe('DrainingError', () => {
  it('says the ledger is draining unless given what else is closed for the drain', () => {
    expect(new DrainingError('post an operation').message).toBe(
      'cannot post an operation: the operation ledger is draining; no new operation is admitted',
    );
    const closed = new DrainingError('register a transfer template', 'the templates are closed');
    expect(closed).toMatchObject({
      code: 'DRAINING',
      action: 'register a transfer template',
      reason: 'the templates are closed',
      message: 'cannot register a transfer template: the templates are closed',
    });
  });
});

describe('RetriesExhaustedError', () => {
  it("ends with its cause's message, and without one where the cause is not an Error", () => {
    expect(new RetriesExhaustedError('pin', 3, { cause: new Error('the peer went away') }).message).toBe(
      'pin failed after 3 attempts: the peer went away',
    );
    expect(new RetriesExhaustedError('pin', 1, { cause: 'refused' }).message).toBe('pin failed after 1 attempt');
  });

  it('is made, not thrown over, for a cause whose message cannot be read', () => {
    const unreadable = new Error('hidden');
    Object.defineProperty(unreadable, 'message', {
      get() {
        throw new Error('no reading');
      },
    });
    expect(new RetriesExhaustedError('pin', 2, { cause: unreadable }).message).toBe(
      'pin failed after 2 attempts: an error whose message could not be read',
    );
  });
});
