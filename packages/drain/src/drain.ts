import { type Bank, type BankLabel, type RegisteredRank, releaseBanks } from '@kvreuse/registry';
import { InvalidDrainOptionError } from './errors.js';
import { type LedgerOperation, type LedgerPostRequest, type OperationLedger, type QuarantinedOperation } from './ledger.js';
import { Listeners } from './listeners.js';

export interface RetainedBankReport {
  readonly bank: BankLabel;
  /** Why it was not handed back: quarantined operation, native refusal, owner refusal. */
  readonly reason: string;
}

/** What a drain did. Counts cover the operations that were live when the drain began. */
export interface DrainReport {
  readonly completed: number;
  readonly cancelled: number;
  readonly failed: number;
  readonly quarantined: readonly QuarantinedOperation[];
  /** Banks deregistered and handed back to their owners, in the order it happened (reverse registration). */
  readonly banksReturned: readonly BankLabel[];
  readonly banksRetained: readonly RetainedBankReport[];
}

export type ShutdownStep =
  | 'stop-intake'
  | 'drain'
  | 'release-operations'
  | 'invalidate-peers'
  | 'deregister'
  | 'hand-back'
  | 'withdraw-rank-parts'
  | 'destroy-agent';

export interface ShutdownStepResult {
  readonly step: ShutdownStep;
  readonly ok: boolean;
  readonly detail: string;
}

export interface ShutdownResult {
  /** Every step, in the fixed order it ran. */
  readonly steps: readonly ShutdownStepResult[];
  /** The drain's report (of the earlier `drain()` call, if there was one). */
  readonly report: DrainReport;
  /** Banks not handed back when shutdown finished, with why (a drain's retained banks may have been released since). */
  readonly banksRetained: readonly RetainedBankReport[];
  /** Operations still quarantined when shutdown finished. */
  readonly quarantined: readonly QuarantinedOperation[];
  /** Whether anything (a bank, an operation, the agent) was retained rather than released. */
  readonly retained: boolean;
  readonly agentDestroyed: boolean;
}

export interface DrainEvents {
  /** Banks of a quarantined operation that quiesced after the drain finished were handed back. */
  released: (operation: LedgerOperation, banks: readonly BankLabel[], retained: readonly RetainedBankReport[]) => void;
  /** The agent was destroyed after a shutdown had to keep it for quarantined operations. */
  'agent-destroyed': () => void;
}

export interface DrainControllerOptions<Request extends LedgerPostRequest> {
  readonly ledger: OperationLedger<Request>;
  /** Default deadline of `shutdown()`: `transport.shutdownDeadlineMs`. */
  readonly shutdownDeadlineMs: number;
  /** Destroyed last by `shutdown()` (the native `Agent`). */
  readonly agent?: { close(): void };
  /** Withdraws this worker's rank parts from discovery (e.g. `withdrawRankParts` of `@kvreuse/registry`). */
  readonly withdrawRankParts?: () => Promise<unknown>;
}

export interface DrainOptions {
  /**
   * How long in-flight operations get: at nine tenths of it (at most 250 ms before it) those still
   * live are cancelled; at the deadline those whose cancel the native layer has not confirmed are
   * quarantined.
   */
  readonly deadlineMs: number;
}

/** Time kept back from a shutdown's deadline for the steps after the drain: a tenth, at most a second. */
const POST_DRAIN_RESERVE_CAP_MS = 1000;
/** Time between a drain's cancels and its quarantine: a tenth of its deadline, at most 250 ms. */
const CANCEL_GRACE_CAP_MS = 250;

function checkDeadline(option: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw new InvalidDrainOptionError(option, value, 'must be a non-negative integer number of milliseconds');
  }
  return value as number;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Drain and ordered shutdown of one agent's banks and operations.
 *
 * `drain({ deadlineMs })` stops intake (later posts fail with `DRAINING`), waits for in-flight
 * operations, cancels and quarantines what is still live at the deadline, then deregisters every bank
 * in reverse registration order and hands each back to its owner — except banks a live operation still
 * references, which are retained and reported with why.
 *
 * `shutdown()` runs, in this order: stop intake → drain → release operations → invalidate peers →
 * deregister → hand banks back → withdraw rank parts → destroy the agent. It is idempotent (every call
 * returns the same result). If quarantined operations keep the agent alive, their later quiescence
 * hands their banks back and destroys the agent (`released`, `agent-destroyed` events).
 */
export class DrainController<Request extends LedgerPostRequest = LedgerPostRequest> {
  readonly #ledger: OperationLedger<Request>;
  readonly #shutdownDeadlineMs: number;
  readonly #agent: { close(): void } | undefined;
  readonly #withdraw: (() => Promise<unknown>) | undefined;
  readonly #ranks: RegisteredRank[] = [];
  readonly #listeners = new Listeners<DrainEvents>();
  #drain: Promise<DrainReport> | undefined;
  #shutdown: Promise<ShutdownResult> | undefined;
  #drained = false;
  #agentPending = false;

  constructor(options: DrainControllerOptions<Request>) {
    this.#ledger = options.ledger;
    this.#shutdownDeadlineMs = checkDeadline('transport.shutdownDeadlineMs', options.shutdownDeadlineMs);
    this.#agent = options.agent;
    this.#withdraw = options.withdrawRankParts;
    this.#ledger.on('quiesced', (operation) => this.#onLateQuiescence(operation));
  }

  /** Records a registered rank; drain hands banks back in the reverse of the order ranks were added. */
  addRank(rank: RegisteredRank): void {
    if (this.#drain !== undefined) throw new InvalidDrainOptionError('rank', { tpRank: rank.tpRank, ppRank: rank.ppRank }, 'cannot be added once draining began');
    this.#ranks.push(rank);
  }

  on<Event extends keyof DrainEvents>(event: Event, listener: DrainEvents[Event]): () => void {
    return this.#listeners.on(event, listener);
  }

  /** Drains once; later calls return the first call's report. */
  drain(options: DrainOptions): Promise<DrainReport> {
    const deadlineMs = checkDeadline('deadlineMs', options?.deadlineMs);
    this.#drain ??= this.#run(deadlineMs, () => undefined);
    return this.#drain;
  }

  /** Shuts down once; later calls (a second signal, say) return the first call's result. */
  shutdown(options: { readonly deadlineMs?: number } = {}): Promise<ShutdownResult> {
    const deadlineMs = checkDeadline('deadlineMs', options.deadlineMs ?? this.#shutdownDeadlineMs);
    this.#shutdown ??= this.#runShutdown(deadlineMs);
    return this.#shutdown;
  }

  async #runShutdown(deadlineMs: number): Promise<ShutdownResult> {
    const clock = this.#ledger.clock;
    const deadlineAt = clock.now() + deadlineMs;
    const steps: ShutdownStepResult[] = [];
    const before = this.#ledger.counts();
    let peersInvalidated: string[] | undefined;
    let invalidateError: string | undefined;
    const invalidatePeers = () => {
      try {
        peersInvalidated = this.#ledger.peers.invalidateAll();
      } catch (error) {
        peersInvalidated = [];
        invalidateError = messageOf(error);
      }
    };
    const drainMs = deadlineMs - Math.min(Math.floor(deadlineMs / 10), POST_DRAIN_RESERVE_CAP_MS);
    // Peers are invalidated between releasing operations and deregistering banks; after an earlier
    // drain() (which does not invalidate them) they are invalidated now.
    const report = await (this.#drain ??= this.#run(drainMs, invalidatePeers));
    if (peersInvalidated === undefined) invalidatePeers();
    const after = this.#ledger.counts();
    steps.push({ step: 'stop-intake', ok: true, detail: 'new operations fail with DRAINING' });
    steps.push({
      step: 'drain',
      ok: report.quarantined.length === 0,
      detail: `${report.completed} completed, ${report.cancelled} cancelled, ${report.failed} failed, ${report.quarantined.length} quarantined`,
    });
    steps.push({
      step: 'release-operations',
      ok: after.live === 0,
      detail: `${after.completed + after.cancelled + after.failed - (before.completed + before.cancelled + before.failed)} released; ${after.live} kept (quarantined)`,
    });
    steps.push({
      step: 'invalidate-peers',
      ok: invalidateError === undefined,
      detail: invalidateError ?? (peersInvalidated?.length ? peersInvalidated.join(', ') : 'no peers'),
    });
    steps.push({ step: 'deregister', ok: report.banksRetained.length === 0, detail: `${report.banksRetained.length} banks retained` });
    steps.push({ step: 'hand-back', ok: report.banksRetained.length === 0, detail: `${report.banksReturned.length} banks handed back` });
    steps.push(await this.#withdrawStep(deadlineAt));
    const live = this.#ledger.counts().live;
    const destroy = this.#destroyAgent(live);
    steps.push(destroy);
    const banksRetained = this.#ranks
      .flatMap((rank) => rank.banks)
      .filter((bank) => bank.state !== 'returned')
      .map((bank) => ({ bank: bank.label(), reason: bank.retainedReason ?? `left ${bank.state}` }));
    return {
      steps,
      report,
      banksRetained,
      quarantined: this.#ledger.quarantined(),
      retained: banksRetained.length > 0 || live > 0 || (this.#agent !== undefined && !destroy.ok),
      agentDestroyed: this.#agent !== undefined && destroy.ok,
    };
  }

  async #withdrawStep(deadlineAt: number): Promise<ShutdownStepResult> {
    if (this.#withdraw === undefined) return { step: 'withdraw-rank-parts', ok: true, detail: 'nothing published' };
    const clock = this.#ledger.clock;
    let timer: unknown;
    try {
      await Promise.race([
        this.#withdraw(),
        new Promise((_, reject) => {
          timer = clock.setTimer(() => reject(new Error('the shutdown deadline passed first')), Math.max(0, deadlineAt - clock.now()));
        }),
      ]);
      return { step: 'withdraw-rank-parts', ok: true, detail: 'withdrawn' };
    } catch (error) {
      return { step: 'withdraw-rank-parts', ok: false, detail: `not withdrawn (their lease expires them): ${messageOf(error)}` };
    } finally {
      clock.clearTimer(timer);
    }
  }

  #destroyAgent(liveOperations: number): ShutdownStepResult {
    if (this.#agent === undefined) return { step: 'destroy-agent', ok: true, detail: 'no agent' };
    if (liveOperations > 0) {
      this.#agentPending = true;
      return { step: 'destroy-agent', ok: false, detail: `kept: ${liveOperations} quarantined operations are not terminal` };
    }
    try {
      this.#agent.close();
      return { step: 'destroy-agent', ok: true, detail: 'destroyed' };
    } catch (error) {
      this.#agentPending = true;
      return { step: 'destroy-agent', ok: false, detail: `kept: ${messageOf(error)}` };
    }
  }

  async #run(deadlineMs: number, beforeDeregistration: () => void): Promise<DrainReport> {
    const ledger = this.#ledger;
    ledger.stopIntake();
    const before = ledger.counts();
    const deadlineAt = ledger.clock.now() + deadlineMs;
    // Cancels go out a little before the deadline, so that the native layer can confirm them in time.
    const cancelAt = deadlineAt - Math.min(Math.floor(deadlineMs / 10), CANCEL_GRACE_CAP_MS);
    await ledger.settle(cancelAt, deadlineAt, `not quiescent at the drain deadline (${deadlineMs} ms)`);
    ledger.stopTimers();
    const after = ledger.counts();
    beforeDeregistration();
    // From here on, a quarantined operation that quiesces releases its own banks.
    this.#drained = true;
    const banks = this.#ranks.flatMap((rank) => rank.banks).reverse();
    const { returned, retained } = await handBanksBack(banks);
    return {
      completed: after.completed - before.completed,
      cancelled: after.cancelled - before.cancelled,
      failed: after.failed - before.failed,
      quarantined: ledger.quarantined(),
      banksReturned: returned,
      banksRetained: retained,
    };
  }

  #onLateQuiescence(operation: LedgerOperation): void {
    if (!this.#drained) return;
    void handBanksBack([...operation.banks].reverse()).then(({ returned, retained }) => {
      this.#listeners.emit('released', operation, returned, retained);
      if (this.#agentPending && this.#agent !== undefined && this.#ledger.counts().live === 0) {
        try {
          this.#agent.close();
          this.#agentPending = false;
          this.#listeners.emit('agent-destroyed');
        } catch {
          // Still busy (another retained bank's registration): kept until the process exits.
        }
      }
    });
  }
}

/**
 * Deregisters the given banks in order, then hands each back to its owner (the registry's
 * `releaseBanks`). A bank still referenced by a live operation is first retained as a quarantine
 * (never deregistered, never handed back); a bank the native layer refuses to deregister is
 * retained; a bank its owner refuses stays `releasing` and is reported as retained too.
 */
async function handBanksBack(banks: readonly Bank[]): Promise<{ returned: BankLabel[]; retained: RetainedBankReport[] }> {
  // Retained before anything is awaited, so that no quiescence can release them in between.
  const referenced = banks
    .filter((bank) => bank.state !== 'returned' && bank.references > 0)
    .map((bank): RetainedBankReport => {
      bank.retain(`still referenced by ${bank.references} live operations at drain`, 'quarantine');
      return { bank: bank.label(), reason: bank.retainedReason ?? `referenced by ${bank.references} live operations` };
    });
  const { returned, retained, unreturned } = await releaseBanks(banks);
  return {
    returned: [...returned],
    retained: [
      ...referenced,
      ...retained.map(({ bank, code, message }) => ({ bank, reason: `deregistration failed with ${code}: ${message}` })),
      ...unreturned.map(({ bank, message }) => ({ bank, reason: `its owner refused it back: ${message}` })),
    ],
  };
}
