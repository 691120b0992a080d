import { describe, expect, it } from 'vitest';
import { DrainingError } from './index.js';

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
