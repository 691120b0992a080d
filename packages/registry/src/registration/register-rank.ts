import { messageOf } from '@kvreuse/errors';
import type { Agent, Region } from '@kvreuse/native-bindings';
import { Bank } from '../banks/bank.js';
import {
  BankAlreadyReleasedError,
  BankInUseError,
  InvalidRankBanksError,
  RankRegistrationError,
  RankReleaseError,
} from '../errors.js';
import type { BankLabel, RetainedBank } from '../banks/label.js';
import {
  checkArray,
  checkDurationMs,
  checkFunction,
  checkNonEmptyString,
  checkOptionsObject,
  checkSignal,
} from '../options.js';

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
 * ends `registered`, or — on a native error, an overlap, unsupported vram, the deadline, an abort, or
 * a bank of the rank changed by someone else while the call waited between banks (`STATE_CHANGED`) —
 * every bank this call registered and still holds is deregistered again in reverse order, each bank
 * is back in the state and with the owner it had, and `RankRegistrationError` names the failing bank,
 * the code and what was rolled back. A bank whose rollback fails is retained (never handed back) and
 * reported; a bank someone else changed is left as they left it.
 */
export async function registerRank(options: RegisterRankOptions): Promise<RegisteredRank> {
  const { agent, banks, signal, timeoutMs } = checkRegisterRankOptions(options);
  const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
  const first = checkOneRank(banks);
  const rank = { tpRank: first.tpRank, ppRank: first.ppRank };
  // Refuse a bank in the wrong state before touching anything native.
  for (const bank of banks) bank.assertRegistrable();

  const registered = new Map<Bank, Region>();
  const checkpoint = () => {
    checkUnchanged(registered);
    if (signal?.aborted === true)
      throw new RegistrationFailure(undefined, 'ABORTED', abortDetail(signal), signal.reason);
    if (deadline !== undefined && performance.now() > deadline) {
      throw new RegistrationFailure(
        undefined,
        'DEADLINE',
        `not registered within ${timeoutMs} ms; ${registered.size} of ${banks.length} banks were`,
        undefined,
      );
    }
  };
  try {
    for (const bank of banks) {
      checkpoint();
      registered.set(bank, await registerBank(agent, bank));
      // Registration is a synchronous native call: give an abort (a timer, the caller) a turn of the event loop.
      if (signal !== undefined) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    checkpoint();
  } catch (error) {
    const failure =
      error instanceof RegistrationFailure
        ? error
        : new RegistrationFailure(undefined, ...describeFailure(error), error);
    throw await rollBack(rank, registered, failure);
  }
  return { ...rank, agent, banks: [...banks] };
}

/** Why a registration stopped: the failing bank (if one), a native or kvreuse code, and a detail. */
class RegistrationFailure {
  constructor(
    readonly bank: Bank | undefined,
    readonly code: string,
    readonly detail: string,
    readonly cause: unknown,
  ) {}
}

/** Registers one bank natively and records it; a bank someone changed meanwhile is refused (`STATE_CHANGED`). */
async function registerBank(agent: RegistrationAgent, bank: Bank): Promise<Region> {
  try {
    bank.beginRegistration();
  } catch (cause) {
    throw new RegistrationFailure(
      bank,
      'STATE_CHANGED',
      `changed by someone else while the registration waited: ${describeFailure(cause)[1]}`,
      cause,
    );
  }
  let region: Region;
  try {
    // The native layer counts dram as one device; a dram bank's deviceId is its NUMA node.
    region = agent.register({
      address: bank.address,
      bytes: bank.bytes,
      kind: bank.memKind,
      device: bank.memKind === 'vram' ? bank.deviceId : 0,
      ...(bank.file === undefined ? {} : { file: bank.file }),
    });
  } catch (cause) {
    if (bank.state === 'registering') bank.abortRegistration();
    throw new RegistrationFailure(bank, ...describeFailure(cause), cause);
  }
  try {
    bank.completeRegistration(region, agent.name);
  } catch (cause) {
    // The bank left `registering` during the native call: the registration is this call's alone to undo.
    try {
      await region.deregister();
    } catch {
      // Reported below through the failure; the native layer keeps refusing what it refused.
    }
    throw new RegistrationFailure(
      bank,
      'STATE_CHANGED',
      `changed by someone else during its native registration: ${describeFailure(cause)[1]}`,
      cause,
    );
  }
  return region;
}

/** Refuses (`STATE_CHANGED`) when a bank this call registered is no longer registered with the region it was given. */
function checkUnchanged(registered: ReadonlyMap<Bank, Region>): void {
  for (const [bank, region] of registered) {
    if (bank.state !== 'registered' || bank.region !== region) {
      const now = bank.region === region ? bank.state : `${bank.state}, its registration replaced`;
      throw new RegistrationFailure(
        bank,
        'STATE_CHANGED',
        `registered by this call, then changed by someone else while it waited: now ${now}`,
        undefined,
      );
    }
  }
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
 * owner. Banks already returned are skipped, a bank given twice is released once, and a bank left
 * `releasing` by an earlier refusal is taken up where it stopped. A per-bank failure never stops the
 * others and is never thrown: a referenced bank is left untouched, a bank the native layer refuses to
 * deregister is retained (`'native-refusal'`), a bank its owner refuses stays `releasing`; the result
 * lists each.
 */
export async function releaseBanks(banks: readonly Bank[]): Promise<BanksRelease> {
  const { deregistered, referenced, retained } = await deregisterBanks(banks);
  const { returned, unreturned } = await returnBanks(deregistered);
  return { returned, referenced, retained, unreturned };
}

/**
 * The deregistration half of `releaseBanks`, for callers that do something between deregistering
 * and handing back (the drain layer reports them as separate steps). Never throws for one bank.
 * No framework owner is called; kvreuse's own allocations are freed as soon as their agent accepted
 * the deregistration (its thread frees them after it ended: one native round trip for both), and
 * `returnBanks` collects those frees.
 */
export async function deregisterBanks(banks: readonly Bank[]): Promise<BanksDeregistration> {
  checkBanks('banks', banks);
  const referenced: Bank[] = [];
  const retained: RetainedBank[] = [];
  const deregistered: Bank[] = [];
  const releasing: { readonly bank: Bank; readonly region: Region | undefined }[] = [];
  // A bank given twice is released once, where it first appears.
  for (const bank of new Set(banks)) {
    if (bank.state === 'returned') continue;
    if (bank.references > 0) {
      referenced.push(bank);
      continue;
    }
    if (bank.state !== 'releasing') bank.beginRelease();
    releasing.push({ bank, region: bank.region });
  }
  // Every deregistration is begun before any is awaited: the agent's thread runs them in the order
  // begun, and one wake-up can announce them all.
  const ended = releasing.map(({ region }) => (region === undefined ? undefined : deregisterOnce(region)));
  for (const { bank, region } of releasing) if (region !== undefined) freeAfterDeregistration(bank, region);
  const outcomes = await Promise.allSettled(ended);
  releasing.forEach(({ bank, region }, index) => {
    const outcome = outcomes[index];
    if (outcome?.status === 'rejected') {
      const [code, detail] = describeFailure(outcome.reason);
      bank.retain(`deregistration failed with ${code}: ${detail}`);
      retained.push({ bank: bank.label(), retainedBy: 'native-refusal', code, reason: bank.retainedReason ?? detail });
      return;
    }
    // Another caller releasing the same bank may have marked it while both waited.
    if (region !== undefined && bank.region === region) bank.markDeregistered();
    deregistered.push(bank);
  });
  return { deregistered, referenced, retained };
}

/** A deregistration under way, and whether the native layer accepted it (then it cannot fail). */
interface Deregistration {
  readonly ended: Promise<void>;
  readonly accepted: boolean;
}

/** Deregistrations under way, so that a bank two callers release at once is deregistered once. */
const deregistrations = new WeakMap<Region, Deregistration>();

/** Deregisters `region`, or joins the deregistration another caller began. */
function deregisterOnce(region: Region): Promise<void> {
  let deregistration = deregistrations.get(region);
  if (deregistration === undefined) {
    const wasOpen = region.isOpen;
    let ended: Promise<void>;
    try {
      ended = region.deregister();
    } catch (cause) {
      ended = Promise.reject(cause);
    }
    // `deregister()` begins the native job before it returns: the region is closed once it was accepted.
    const begun: Deregistration = { ended, accepted: wasOpen === true && isClosed(region) };
    deregistrations.set(region, begun);
    // A refusal is not kept: a later release (the bank retained meanwhile) tries again.
    ended.catch(() => deregistrations.get(region) === begun && deregistrations.delete(region));
    deregistration = begun;
  }
  return deregistration.ended;
}

function isClosed(region: Region): boolean {
  return region.isOpen === false;
}

/** Hand-backs begun by `deregisterBanks`, for `returnBanks` to collect. */
const earlyHandBacks = new WeakMap<Bank, Promise<HandBackFailure | undefined>>();

/**
 * Begins freeing a kvreuse-owned bank whose deregistration its agent accepted, when the same agent
 * frees the allocation: its thread runs the free after the deregistration, so the bank is never
 * reported returned before its memory is gone.
 */
function freeAfterDeregistration(bank: Bank, region: Region): void {
  const owner = bank.owner;
  if (owner.kind !== 'kvreuse' || owner.allocation.sharesAgentWith?.(region) !== true) return;
  if (deregistrations.get(region)?.accepted !== true || bank.region !== region) return;
  bank.markDeregistered();
  earlyHandBacks.set(bank, handBack(bank));
}

interface HandBackFailure {
  readonly cause: unknown;
}

/** Hands the bank back to its owner; a refusal is returned, never thrown. */
function handBack(bank: Bank): Promise<HandBackFailure | undefined> {
  return bank.completeRelease().then(
    () => undefined,
    (cause: unknown) => ({ cause }),
  );
}

/**
 * The hand-back half of `releaseBanks`: hands each deregistered bank back to its owner, in order
 * (kvreuse's own allocations: every free begun at once, in that order).
 * A bank its owner refuses stays `releasing` and is listed in `unreturned`; never throws for one bank.
 */
export async function returnBanks(
  deregistered: readonly Bank[],
): Promise<Pick<BanksRelease, 'returned' | 'unreturned'>> {
  checkBanks('deregistered', deregistered);
  const returned: BankLabel[] = [];
  const unreturned: RetainedBank[] = [];
  // A bank given twice is handed back once, where it first appears.
  const banks = [...new Set(deregistered)];
  // kvreuse's own allocations are all freed at once (the agent's thread frees them in the order begun,
  // and one wake-up can announce them all), unless deregisterBanks began it; framework owners are
  // called one at a time, in order.
  const frees = new Map(
    banks
      .filter((bank) => bank.owner.kind === 'kvreuse')
      .map((bank) => [bank, takeEarlyHandBack(bank) ?? handBack(bank)]),
  );
  for (const bank of banks) {
    const failure = await (frees.get(bank) ?? handBack(bank));
    if (failure === undefined) {
      returned.push(bank.label());
      continue;
    }
    const [code, detail] = describeFailure(failure.cause);
    unreturned.push({
      bank: bank.label(),
      retainedBy: 'owner-refusal',
      code,
      reason: `its owner refused it back: ${detail}`,
    });
  }
  return { returned, unreturned };
}

function takeEarlyHandBack(bank: Bank): Promise<HandBackFailure | undefined> | undefined {
  const early = earlyHandBacks.get(bank);
  earlyHandBacks.delete(bank);
  return early;
}

/**
 * Deregisters every bank of a registered rank in reverse order, then hands each back to its owner.
 * Refuses up front (changing nothing) while any bank is referenced or already released. A bank the
 * native layer refuses to deregister (e.g. `BUSY`) is retained; a bank its owner refuses back stays
 * `releasing`; both are reported together after every other bank was handled.
 */
export async function releaseRank(rank: RegisteredRank): Promise<void> {
  checkOptionsObject('rank', rank);
  checkBanks('rank.banks', rank.banks);
  for (const bank of rank.banks) {
    if (bank.references > 0) throw new BankInUseError(bank, bank.references, 'release its rank');
    if (bank.state === 'releasing' || bank.state === 'returned')
      throw new BankAlreadyReleasedError(bank, bank.state, 'release its rank');
  }
  const { retained, unreturned } = await releaseBanks([...rank.banks].reverse());
  if (retained.length > 0 || unreturned.length > 0) throw new RankReleaseError(rank, retained, unreturned);
}

async function rollBack(
  rank: { tpRank: number; ppRank: number },
  registered: ReadonlyMap<Bank, Region>,
  failure: RegistrationFailure,
): Promise<RankRegistrationError> {
  const rolledBack: BankLabel[] = [];
  const retained: RetainedBank[] = [];
  for (const [bank, region] of [...registered].reverse()) {
    // Changed by someone else while the call waited (released, say): no longer this call's to undo.
    if (bank.state !== 'registered' || bank.region !== region) continue;
    try {
      // Someone took a reference while the call waited between banks: that bank cannot be undone.
      if (bank.references > 0) throw new BankInUseError(bank, bank.references, 'roll back its registration');
      await region.deregister();
    } catch (rollbackCause) {
      const [code, detail] = describeFailure(rollbackCause);
      bank.retain(`rollback of a failed rank registration could not deregister it: ${code}: ${detail}`);
      retained.push({ bank: bank.label(), retainedBy: 'native-refusal', code, reason: `${code}: ${detail}` });
      continue;
    }
    bank.undoRegistration();
    rolledBack.push(bank.label());
  }
  const { bank, code, detail, cause } = failure;
  return new RankRegistrationError(rank, bank?.label(), code, detail, rolledBack, retained, { cause });
}

function checkRegisterRankOptions(options: RegisterRankOptions): RegisterRankOptions {
  checkOptionsObject('options', options);
  const agent = checkOptionsObject('agent', options.agent);
  checkNonEmptyString('agent.name', agent.name);
  checkFunction('agent.register', agent.register);
  checkBanks('banks', options.banks);
  checkDurationMs('timeoutMs', options.timeoutMs);
  checkSignal('signal', options.signal);
  return options;
}

function checkBanks(option: string, banks: unknown): void {
  checkArray(option, banks, (bank, element) => {
    if (!(bank instanceof Bank)) throw new InvalidRankBanksError(element, bank, 'must be a Bank (Bank.adopt)');
  });
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
      throw new InvalidRankBanksError(
        `banks[${position}].index`,
        bank.index,
        `banks must be given in index order; expected ${position}`,
      );
    }
  });
  return first;
}

/** [code, detail]: the native status name and detail of a `NativeTransportError`, or the error's code (else name) and message. */
function describeFailure(cause: unknown): [code: string, detail: string] {
  if (cause instanceof Error) {
    const { code, detail } = cause as Error & { code?: unknown; detail?: unknown };
    return [
      typeof code === 'string' ? code : cause.name,
      typeof detail === 'string' && detail !== '' ? detail : cause.message,
    ];
  }
  return ['UNKNOWN', String(cause)];
}

function abortDetail(signal: AbortSignal): string {
  return messageOf(signal.reason);
}
