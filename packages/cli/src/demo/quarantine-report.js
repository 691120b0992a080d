/** Every TerminalState, for the message codec. */
export const terminalStates = ['done', 'cancelled', 'failed'];
const retainedBanks = (operation) => operation.banks.filter((bank) => bank.state === 'retained').length;
/** Says every quarantine of `ledger` and its end, for as long as the ledger lives. */
export function reportQuarantines(ledger, say) {
    ledger.on('quarantined', (operation) => say({ type: 'quarantined', operation: operation.id, banks: operation.banks.length, banksRetained: retainedBanks(operation) }));
    ledger.on('quiesced', (operation, quiescence) => say({ type: 'quiesced', operation: operation.id, terminal: quiescence.terminal, ...(quiescence.code === undefined ? {} : { code: quiescence.code }), bytesDone: quiescence.bytesDone, banksRetained: retainedBanks(operation) }));
}
