// Typed errors of @kvreuse/registry. Every error carries a stable `code` and names the offending
// thing (bank, rank, owner) and the value that was refused.
import { causeSuffix, describeValue as describe, KvreuseError } from '@kvreuse/errors';
import { type BankLabel, type BankRetainedBy, type BankState, formatBank, type RetainedBank } from './banks/label.js';

/** Every `code` a registry error carries. */
export type RegistryErrorCode =
  | 'INVALID_BANK'
  | 'BANK_INVALID_TRANSITION'
  | 'BANK_ALREADY_REGISTERED'
  | 'BANK_ALREADY_RELEASED'
  | 'BANK_REINSTATE_REFUSED'
  | 'BANK_IN_USE'
  | 'BANK_REFERENCE_ALREADY_RELEASED'
  | 'BANK_OWNER_RELEASE_FAILED'
  | 'RANK_REGISTRATION_FAILED'
  | 'RANK_RELEASE_FAILED'
  | 'INVALID_RANK_BANKS'
  | 'INVALID_REGISTRY_OPTION';

export abstract class RegistryError extends KvreuseError<RegistryErrorCode> {}

/** A bank description or owner that cannot describe real memory; `field` says which part. */
export class InvalidBankError extends RegistryError {
  readonly code = 'INVALID_BANK';
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`bank: ${field} = ${describe(value)} is refused: ${reason}`);
  }
}

/** A transition the bank's ownership state machine does not allow from its current state. */
export class BankStateError extends RegistryError {
  readonly code:
    'BANK_INVALID_TRANSITION' | 'BANK_ALREADY_REGISTERED' | 'BANK_ALREADY_RELEASED' | 'BANK_REINSTATE_REFUSED' =
    'BANK_INVALID_TRANSITION';
  constructor(
    readonly bank: BankLabel,
    readonly state: BankState,
    readonly transition: string,
    detail?: string,
  ) {
    super(`${formatBank(bank)}: cannot ${transition} while ${state}${detail === undefined ? '' : `: ${detail}`}`);
  }
}

/** Registering a bank that is already registering, registered or retained. */
export class BankAlreadyRegisteredError extends BankStateError {
  override readonly code = 'BANK_ALREADY_REGISTERED';
}

/** Releasing a bank that is already releasing or returned. */
export class BankAlreadyReleasedError extends BankStateError {
  override readonly code = 'BANK_ALREADY_RELEASED';
}

/**
 * `reinstate()` refused: the bank is not retained (`not-retained`), was retained by a native refusal
 * (`native-refusal`: its registration state is unknown, it may only be released), or references
 * still hold it (`referenced`). Names the bank, its state, and why and by what it was retained.
 */
export class BankReinstateError extends BankStateError {
  override readonly code = 'BANK_REINSTATE_REFUSED';
  constructor(
    bank: BankLabel,
    state: BankState,
    readonly refusal: 'not-retained' | 'native-refusal' | 'referenced',
    readonly retainedBy: BankRetainedBy | undefined,
    readonly retainedReason: string | undefined,
    readonly references: number,
  ) {
    const why = {
      'not-retained': 'only a bank retained by a quarantine can be reinstated',
      'native-refusal': `it was retained by a native refusal (${retainedReason ?? 'no reason given'}), so its registration state is unknown; it can only be released`,
      referenced: `${references} reference(s) still hold it (retained by ${retainedBy ?? 'nothing'}: ${retainedReason ?? 'no reason given'})`,
    }[refusal];
    super(bank, state, 'reinstate', why);
  }
}

/** Releasing (or undoing the registration of) a bank that references still hold. */
export class BankInUseError extends RegistryError {
  readonly code = 'BANK_IN_USE';
  constructor(
    readonly bank: BankLabel,
    readonly references: number,
    readonly transition: string,
  ) {
    super(`${formatBank(bank)}: cannot ${transition} while ${references} reference(s) hold it`);
  }
}

/** A bank reference released a second time. */
export class BankReferenceReleasedError extends RegistryError {
  readonly code = 'BANK_REFERENCE_ALREADY_RELEASED';
  constructor(readonly bank: BankLabel) {
    super(`${formatBank(bank)}: this reference was already released`);
  }
}

/** The owner's release callback (or the native free of kvreuse-owned memory) failed; the bank stays releasing. */
export class BankOwnerReleaseError extends RegistryError {
  readonly code = 'BANK_OWNER_RELEASE_FAILED';
  constructor(
    readonly bank: BankLabel,
    readonly owner: 'framework' | 'kvreuse',
    options?: ErrorOptions,
  ) {
    const cause = causeSuffix(options?.cause);
    super(
      `${formatBank(bank)}: handing it back to ${owner === 'framework' ? 'the framework' : 'the native allocator'} failed${cause}; it stays releasing, retry`,
      options,
    );
  }
}

/**
 * `registerRank` failed and rolled back. `bank` is the bank that failed (undefined when the call was
 * aborted or ran out of time between banks), `nativeCode` the native status name (`NOT_SUPPORTED`,
 * `INVALID_PARAM`, …), or kvreuse's own `ABORTED` / `DEADLINE` / `STATE_CHANGED` (a bank of the rank was
 * changed by someone else while the call waited between banks; `bank` names it, and it is left as they
 * left it); `rolledBack` lists the banks deregistered again, in the order it happened, and `retained`
 * the banks whose rollback failed.
 */
export class RankRegistrationError extends RegistryError {
  readonly code = 'RANK_REGISTRATION_FAILED';
  constructor(
    readonly rank: { readonly tpRank: number; readonly ppRank: number },
    readonly bank: BankLabel | undefined,
    readonly nativeCode: string,
    readonly detail: string,
    readonly rolledBack: readonly BankLabel[],
    readonly retained: readonly RetainedBank[],
    options?: ErrorOptions,
  ) {
    const where = bank === undefined ? `rank (tp ${rank.tpRank}, pp ${rank.ppRank})` : formatBank(bank);
    const undone =
      rolledBack.length === 0
        ? 'nothing was registered, nothing rolled back'
        : `rolled back banks ${rolledBack.map((b) => b.index).join(', ')}`;
    const kept =
      retained.length === 0
        ? ''
        : `; rollback FAILED for ${retained.map((r) => `bank ${r.bank.index} (${r.reason})`).join(', ')}, retained`;
    super(
      `registering ${where} failed with ${nativeCode}${detail === '' ? '' : `: ${detail}`}; ${undone}${kept}`,
      options,
    );
  }
}

/** `releaseRank` could not hand every bank back; `retained` stay quarantined, `unreturned` stay releasing. */
export class RankReleaseError extends RegistryError {
  readonly code = 'RANK_RELEASE_FAILED';
  constructor(
    readonly rank: { readonly tpRank: number; readonly ppRank: number },
    readonly retained: readonly RetainedBank[],
    readonly unreturned: readonly RetainedBank[],
  ) {
    const parts = [
      ...retained.map((r) => `bank ${r.bank.index} not deregistered (${r.reason}), retained`),
      ...unreturned.map((r) => `bank ${r.bank.index} deregistered but not handed back (${r.reason}), still releasing`),
    ];
    super(`releasing rank (tp ${rank.tpRank}, pp ${rank.ppRank}) was incomplete: ${parts.join('; ')}`);
  }
}

/** The banks given to `registerRank` / `releaseRank` do not form one rank (empty, mixed ranks, indices out of order). */
export class InvalidRankBanksError extends RegistryError {
  readonly code = 'INVALID_RANK_BANKS';
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`rank banks: ${field} = ${describe(value)} is refused: ${reason}`);
  }
}

/** An option of a registry function or constructor that is missing or has the wrong shape; `option` names it. */
export class InvalidRegistryOptionError extends RegistryError {
  readonly code = 'INVALID_REGISTRY_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`${option} = ${describe(value)} is refused: ${rule}`);
  }
}
