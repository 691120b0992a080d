// How a bank is named in messages, the states of its ownership and why one may be kept back.
/** Names a bank in messages: its rank, index, address and size. */
export interface BankLabel {
  readonly tpRank: number;
  readonly ppRank: number;
  readonly index: number;
  readonly address: bigint;
  readonly bytes: bigint;
}

export function formatBank(bank: BankLabel): string {
  return `bank ${bank.index} of rank (tp ${bank.tpRank}, pp ${bank.ppRank}) at 0x${bank.address.toString(16)} (${bank.bytes} bytes)`;
}

export type BankState = 'owned' | 'registering' | 'registered' | 'releasing' | 'returned' | 'retained';

/**
 * Why a bank is retained. `quarantine`: an operation that touches it was quarantined by the drain
 * layer; its registration is intact, and once nothing references it the bank may be reinstated.
 * `native-refusal`: the native layer refused a deregistration (or a rollback could not undo the
 * registration); what the memory's registration state is, is not known, so the bank may only be
 * released, never put back in service.
 */
export type BankRetainedBy = 'quarantine' | 'native-refusal';

/**
 * A bank that was not handed back, and what keeps it: `quarantine` (a live operation may touch it),
 * `native-refusal` (the native layer refused to deregister it; it is retained, never handed back) or
 * `owner-refusal` (deregistered, but its owner refused it back; it stays `releasing` and
 * `completeRelease()` retries).
 */
export interface RetainedBank {
  readonly bank: BankLabel;
  readonly retainedBy: BankRetainedBy | 'owner-refusal';
  /**
   * The code of the refusal when one was seen: the native status name (`BUSY`), or the error's
   * code (`BANK_IN_USE`, `BANK_OWNER_RELEASE_FAILED`) or name when it was not a native error.
   */
  readonly code?: string;
  /** Why, in words. */
  readonly reason: string;
}
