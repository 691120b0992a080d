import type { Agent } from '@kvreuse/native-bindings';
import type { Bank, BankRegion } from '../banks/bank.js';
import {
  BankAlreadyReleasedError,
  BankInUseError,
  InvalidRankBanksError,
  RankRegistrationError,
  RankReleaseError,
  type BankLabel,
  type RetainedBank,
} from '../errors.js';

/** The part of a native agent that registration uses. */
export type RegistrationAgent = Pick<Agent, 'name' | 'register'>;

export interface RegisterRankOptions {
  readonly agent: RegistrationAgent;
  /** Every bank of one rank, in bank-index order (0, 1, …), each `owned`. */
  readonly banks: readonly Bank[];
  /** The whole rank must be registered within this many milliseconds; checked before each bank (code `DEADLINE`). */
  readonly timeoutMs?: number;
  /** Aborting stops before the next bank and rolls back (code `ABORTED`). */
  readonly signal?: AbortSignal;
}

/** A rank whose every bank is registered with one agent. */
export interface RegisteredRank {
  readonly tpRank: number;
  readonly ppRank: number;
  readonly agent: RegistrationAgent;
  readonly banks: readonly Bank[];
}

/**
 * Registers every bank of one rank with the native agent, as one transaction: either every bank
 * ends `registered`, or — on a native error, an overlap, unsupported vram, the deadline or an abort — every bank
 * this call registered is deregistered again in reverse order, each bank is back in the state and
 * with the owner it had, and `RankRegistrationError` names the failing bank, the native code and
 * what was rolled back. A bank whose rollback fails is retained (never handed back) and reported.
 */
export async function registerRank(options: RegisterRankOptions): Promise<RegisteredRank> {
  const { agent, banks, signal, timeoutMs } = options;
  if (timeoutMs !== undefined && !(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new InvalidRankBanksError('timeoutMs', timeoutMs, 'must be a positive number of milliseconds');
  }
  const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
  const first = checkOneRank(banks);
  const rank = { tpRank: first.tpRank, ppRank: first.ppRank };
  // Refuse a bank in the wrong state before touching anything native.
  for (const bank of banks) bank.assertRegistrable();

  const registered: Bank[] = [];
  for (const bank of banks) {
    if (signal?.aborted === true) {
      throw rollBack(rank, registered, undefined, 'ABORTED', abortDetail(signal), signal.reason);
    }
    if (deadline !== undefined && performance.now() > deadline) {
      throw rollBack(rank, registered, undefined, 'DEADLINE', `not registered within ${timeoutMs} ms; ${registered.length} of ${banks.length} banks were`, undefined);
    }
    bank.beginRegistration();
    let region: BankRegion;
    try {
      // The native layer counts dram as one device; a dram bank's deviceId is its NUMA node.
      region = agent.register({ address: bank.address, bytes: bank.bytes, kind: bank.memKind, device: bank.memKind === 'vram' ? bank.deviceId : 0 });
    } catch (cause) {
      bank.abortRegistration();
      const { code, detail } = describeFailure(cause);
      throw rollBack(rank, registered, bank, code, detail, cause);
    }
    bank.completeRegistration(region);
    registered.push(bank);
    // Registration is a synchronous native call: give an abort (a timer, the caller) a turn of the event loop.
    if (signal !== undefined) await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return { ...rank, agent, banks: [...banks] };
}

/** What `releaseBanks` did with each bank it was given. */
export interface BanksRelease {
  /** Deregistered and handed back to their owners, in the order given. */
  readonly returned: readonly BankLabel[];
  /** Still referenced (a live operation may touch them): left exactly as they were. */
  readonly referenced: readonly Bank[];
  /** The native layer refused to deregister them (e.g. `BUSY`): retained, never handed back. */
  readonly retained: readonly RetainedBank[];
  /** Deregistered, but their owner refused them back: still `releasing` (`completeRelease()` retries). */
  readonly unreturned: readonly RetainedBank[];
}

/** What `deregisterBanks` did: the first half of `releaseBanks`. */
export interface BanksDeregistration {
  /** Deregistered (`releasing`, no native registration left), in the order given: hand them back with `returnBanks`. */
  readonly deregistered: readonly Bank[];
  readonly referenced: readonly Bank[];
  readonly retained: readonly RetainedBank[];
}

/**
 * Deregisters the given banks in the order given, then hands each deregistered bank back to its
 * owner. Banks already returned are skipped, and a bank left `releasing` by an earlier refusal is
 * taken up where it stopped. A per-bank failure never stops the others and is never thrown: a
 * referenced bank is left untouched, a bank the native layer refuses to deregister is retained
 * (`'native-refusal'`), a bank its owner refuses stays `releasing`; the result lists each.
 */
export async function releaseBanks(banks: readonly Bank[]): Promise<BanksRelease> {
  const { deregistered, referenced, retained } = deregisterBanks(banks);
  const { returned, unreturned } = await returnBanks(deregistered);
  return { returned, referenced, retained, unreturned };
}

/**
 * The deregistration half of `releaseBanks`, for callers that do something between deregistering
 * and handing back (the drain layer reports them as separate steps). Never throws for one bank.
 */
export function deregisterBanks(banks: readonly Bank[]): BanksDeregistration {
  const referenced: Bank[] = [];
  const retained: RetainedBank[] = [];
  const deregistered: Bank[] = [];
  for (const bank of banks) {
    if (bank.state === 'returned') continue;
    if (bank.references > 0) {
      referenced.push(bank);
      continue;
    }
    if (bank.state !== 'releasing') bank.beginRelease();
    const region = bank.region;
    if (region !== undefined) {
      try {
        region.deregister();
      } catch (cause) {
        const failure = retainedBank(bank, cause);
        bank.retain(`deregistration failed with ${failure.code}: ${failure.message}`);
        retained.push(failure);
        continue;
      }
      bank.markDeregistered();
    }
    deregistered.push(bank);
  }
  return { deregistered, referenced, retained };
}

/**
 * The hand-back half of `releaseBanks`: hands each deregistered bank back to its owner, in order.
 * A bank its owner refuses stays `releasing` and is listed in `unreturned`; never throws for one bank.
 */
export async function returnBanks(deregistered: readonly Bank[]): Promise<Pick<BanksRelease, 'returned' | 'unreturned'>> {
  const returned: BankLabel[] = [];
  const unreturned: RetainedBank[] = [];
  for (const bank of deregistered) {
    try {
      await bank.completeRelease();
      returned.push(bank.label());
    } catch (cause) {
      unreturned.push(retainedBank(bank, cause));
    }
  }
  return { returned, unreturned };
}

/**
 * Deregisters every bank of a registered rank in reverse order, then hands each back to its owner.
 * Refuses up front (changing nothing) while any bank is referenced or already released. A bank the
 * native layer refuses to deregister (e.g. `BUSY`) is retained; a bank its owner refuses back stays
 * `releasing`; both are reported together after every other bank was handled.
 */
export async function releaseRank(rank: RegisteredRank): Promise<void> {
  for (const bank of rank.banks) {
    if (bank.references > 0) throw new BankInUseError(bank, bank.references, 'release its rank');
    if (bank.state === 'releasing' || bank.state === 'returned') throw new BankAlreadyReleasedError(bank, bank.state, 'release its rank');
  }
  const { retained, unreturned } = await releaseBanks([...rank.banks].reverse());
  if (retained.length > 0 || unreturned.length > 0) throw new RankReleaseError(rank, retained, unreturned);
}

function rollBack(
  rank: { tpRank: number; ppRank: number },
  registered: readonly Bank[],
  failed: Bank | undefined,
  code: string,
  detail: string,
  cause: unknown,
): RankRegistrationError {
  const rolledBack: BankLabel[] = [];
  const retained: RetainedBank[] = [];
  for (const bank of [...registered].reverse()) {
    try {
      // Someone took a reference while the call waited between banks: that bank cannot be undone.
      if (bank.references > 0) throw new BankInUseError(bank, bank.references, 'roll back its registration');
      bank.region?.deregister();
    } catch (rollbackCause) {
      const failure = retainedBank(bank, rollbackCause);
      bank.retain(`rollback of a failed rank registration could not deregister it: ${failure.code}: ${failure.message}`);
      retained.push(failure);
      continue;
    }
    bank.undoRegistration();
    rolledBack.push(bank.label());
  }
  return new RankRegistrationError(rank, failed === undefined ? undefined : failed.label(), code, detail, rolledBack, retained, { cause });
}

function checkOneRank(banks: readonly Bank[]): Bank {
  const first = banks[0];
  if (first === undefined) throw new InvalidRankBanksError('banks', banks, 'a rank has at least one bank');
  banks.forEach((bank, position) => {
    if (bank.tpRank !== first.tpRank || bank.ppRank !== first.ppRank) {
      throw new InvalidRankBanksError(
        `banks[${position}]`,
        { tpRank: bank.tpRank, ppRank: bank.ppRank },
        `belongs to another rank than banks[0] (tp ${first.tpRank}, pp ${first.ppRank})`,
      );
    }
    if (bank.index !== position) {
      throw new InvalidRankBanksError(`banks[${position}].index`, bank.index, `banks must be given in index order; expected ${position}`);
    }
  });
  return first;
}

/** The native status name and detail of a `NativeTransportError`, or the error's name and message otherwise. */
function describeFailure(cause: unknown): { code: string; detail: string } {
  if (cause instanceof Error) {
    const { code, detail } = cause as Error & { code?: unknown; detail?: unknown };
    return {
      code: typeof code === 'string' ? code : cause.name,
      detail: typeof detail === 'string' && detail !== '' ? detail : cause.message,
    };
  }
  return { code: 'UNKNOWN', detail: String(cause) };
}

function retainedBank(bank: Bank, cause: unknown): RetainedBank {
  const { code, detail } = describeFailure(cause);
  return { bank: bank.label(), code, message: detail };
}

function abortDetail(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : String(reason);
}
