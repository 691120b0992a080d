import type { LedgerEvents, LedgerOperation } from '@kvreuse/drain';
import { describe, expect, it } from 'vitest';
import { type QuarantineEvents, type QuarantineMessage, reportQuarantines } from './quarantine-report.js';

/** The two ledger events, fired by hand. */
class Events implements QuarantineEvents {
  readonly listeners: { quarantined?: LedgerEvents['quarantined']; quiesced?: LedgerEvents['quiesced'] } = {};
  on<Event extends 'quarantined' | 'quiesced'>(event: Event, listener: LedgerEvents[Event]): () => void {
    (this.listeners as Record<string, unknown>)[event] = listener;
    return () => undefined;
  }
}

const operationOn = (id: string, banks: { state: string }[]) => ({ id, banks }) as unknown as LedgerOperation;

describe('reportQuarantines', () => {
  it('says each quarantine with the banks it holds back, and its end with the banks still held back then', () => {
    const events = new Events();
    const said: QuarantineMessage[] = [];
    reportQuarantines(events, (message) => said.push(message));
    const banks = [{ state: 'retained' }, { state: 'retained' }];
    const first = operationOn('p#1', banks);
    const second = operationOn('p#2', banks);
    events.listeners.quarantined?.(first);
    events.listeners.quarantined?.(second);
    // The first ends while the second still holds their banks; they are back in service once the second ends.
    events.listeners.quiesced?.(first, {
      terminal: 'cancelled',
      code: 'CANCELED',
      bytesDone: 0,
      late: false,
      quarantined: true,
    });
    for (const bank of banks) bank.state = 'registered';
    events.listeners.quiesced?.(second, { terminal: 'done', bytesDone: 4096, late: true, quarantined: true });
    expect(said).toEqual([
      { type: 'quarantined', operation: 'p#1', banks: 2, banksRetained: 2 },
      { type: 'quarantined', operation: 'p#2', banks: 2, banksRetained: 2 },
      { type: 'quiesced', operation: 'p#1', terminal: 'cancelled', code: 'CANCELED', bytesDone: 0, banksRetained: 2 },
      { type: 'quiesced', operation: 'p#2', terminal: 'done', bytesDone: 4096, banksRetained: 0 },
    ]);
  });
});
