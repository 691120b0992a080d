// What a rank says about its operations that outlived their abandon deadline: each quarantine as it
// happens, with how many of the banks the operation touches it holds back, and each one's end once the
// native layer proves it terminal, with how many of those banks are still held back then (by another
// unfinished operation). The chaos runs check the invariant on these messages.
import type { LedgerEvents, LedgerOperation, TerminalState } from '@kvreuse/drain';

export type QuarantineMessage =
  | { readonly type: 'quarantined'; readonly operation: string; readonly banks: number; readonly banksRetained: number }
  | {
      readonly type: 'quiesced';
      readonly operation: string;
      readonly terminal: TerminalState;
      readonly code?: string;
      readonly bytesDone: number;
      readonly banksRetained: number;
    };

/** The ledger events this needs: `OperationLedger` has them. */
export interface QuarantineEvents {
  on<Event extends 'quarantined' | 'quiesced'>(event: Event, listener: LedgerEvents[Event]): () => void;
}

/** Every TerminalState, for the message codec. */
export const terminalStates: readonly TerminalState[] = ['done', 'cancelled', 'failed'];

const retainedBanks = (operation: LedgerOperation): number =>
  operation.banks.filter((bank) => bank.state === 'retained').length;

/** Says every quarantine of `ledger` and its end, for as long as the ledger lives. */
export function reportQuarantines(ledger: QuarantineEvents, say: (message: QuarantineMessage) => void): void {
  ledger.on('quarantined', (operation) =>
    say({
      type: 'quarantined',
      operation: operation.id,
      banks: operation.banks.length,
      banksRetained: retainedBanks(operation),
    }),
  );
  ledger.on('quiesced', (operation, quiescence) =>
    say({
      type: 'quiesced',
      operation: operation.id,
      terminal: quiescence.terminal,
      ...(quiescence.code === undefined ? {} : { code: quiescence.code }),
      bytesDone: quiescence.bytesDone,
      banksRetained: retainedBanks(operation),
    }),
  );
}
