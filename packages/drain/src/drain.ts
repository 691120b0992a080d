import { describeValue, messageOf } from '@kvreuse/errors';
import {
  type Bank,
  type BankLabel,
  deregisterBanks,
  formatBank,
  type RegisteredRank,
  type RetainedBank,
  returnBanks,
} from '@kvreuse/registry';
import { InvalidDrainOptionError } from './errors.js';
import {
  type LedgerCounts,
  type LedgerOperation,
  type LedgerPostRequest,
  OperationLedger,
  type QuarantinedOperation,
} from './ledger.js';
import { Listeners } from './listeners.js';
import { checkFunction, checkOptionsObject, checkRegisteredRank } from './options.js';

/** What a hook the drain waits for (`waitForReaders`, the withdrawals) is given: how long it is waited for. */
export interface StepDeadline {
  /** On the ledger's clock: the shutdown does not wait for the hook past this time. */
  readonly deadlineAt: number;
  /** The same deadline, in milliseconds from the call. */
  readonly timeoutMs: number;
  /**
   * Aborted when the deadline passes: stop waiting, the shutdown goes on. A hook whose promise rejects from
   * this abort's listener, directly or through the `async` functions that wrap it, has its own error reported
   * (naming what had not ended, say), not the deadline's.
   */
  readonly signal: AbortSignal;
}

/** What `waitForReaders` is given: how long it may wait. */
export type ReaderWait = StepDeadline;

/** What waiting for readers found: the pins readers held on this worker's blocks when the wait began. */
export interface ReadersOutcome {
  /** Released by their readers (their operations were quiescent). */
  readonly released: number;
  /** Lapsed: their readers stopped renewing them. */
  readonly lapsed: number;
  /** Still held when the wait ended: those readers may still be reading. */
  readonly outstanding: number;
}

/**
 * Waits until every reader's pin on this worker's blocks is released or has lapsed (the endpoint
 * supplies it: it refuses new pins first, then waits). Called after the worker was withdrawn from
 * discovery, before intake stops; must resolve by `wait.deadlineAt`.
 */
export type WaitForReaders = (wait: ReaderWait) => Promise<ReadersOutcome>;

export type ShutdownStep =
  | 'withdraw-rank-parts'
  | 'withdraw-inventory'
  | 'wait-for-readers'
  | 'stop-intake'
  | 'drain'
  | 'invalidate-peers'
  | 'deregister'
  | 'hand-back'
  | 'destroy-agent';

/** How one step ended: `ok` with what it did, `failed` with the error, or `skipped` with why. */
export type ShutdownStepOutcome =
  | { readonly outcome: 'ok'; readonly detail: string }
  | { readonly outcome: 'failed'; readonly error: string }
  | { readonly outcome: 'skipped'; readonly reason: string };

/** One step, recorded when it ended, in the order the steps ran. */
export type ShutdownStepResult = {
  readonly step: ShutdownStep;
  /** When it started, on the ledger's clock (monotonic milliseconds). */
  readonly startedAt: number;
  readonly durationMs: number;
} & ShutdownStepOutcome;

/** What a drain did. Counts cover the operations that were live when intake stopped. */
export interface DrainReport {
  readonly completed: number;
  readonly cancelled: number;
  readonly failed: number;
  readonly quarantined: readonly QuarantinedOperation[];
  /** Banks deregistered and handed back to their owners, in the order it happened (reverse registration). */
  readonly banksReturned: readonly BankLabel[];
  readonly banksRetained: readonly RetainedBank[];
  /** What `waitForReaders` reported; undefined when no hook was given or it failed. */
  readonly readers: ReadersOutcome | undefined;
  /** The drain's steps, as they ran (from the withdrawals to the hand-back). */
  readonly steps: readonly ShutdownStepResult[];
}

export interface ShutdownResult {
  /** Every step, in the order it ran: the drain's (of an earlier `drain()` call, if there was one), then the shutdown's own. */
  readonly steps: readonly ShutdownStepResult[];
  /** The drain's report (of the earlier `drain()` call, if there was one). */
  readonly report: DrainReport;
  /** Banks not handed back when shutdown finished, with why (a drain's retained banks may have been released since). */
  readonly banksRetained: readonly RetainedBank[];
  /** Operations still quarantined when shutdown finished. */
  readonly quarantined: readonly QuarantinedOperation[];
  /** Whether anything (a bank, an operation, the agent) was retained rather than released. */
  readonly retained: boolean;
  readonly agentDestroyed: boolean;
}

export interface DrainEvents {
  /** Banks of a quarantined operation that quiesced after the drain finished were handed back. */
  released: (operation: LedgerOperation, banks: readonly BankLabel[], retained: readonly RetainedBank[]) => void;
  /** The agent was destroyed after a shutdown had to keep it for quarantined operations. */
  'agent-destroyed': () => void;
}

/** What the drain needs of the native agent: `Agent.close` of `@kvreuse/native-bindings`. */
export interface ClosableAgent {
  close(options: { readonly deadlineMs: number }): Promise<unknown>;
}

export interface DrainControllerOptions<Request extends LedgerPostRequest> {
  readonly ledger: OperationLedger<Request>;
  /** Default deadline of `shutdown()`: `transport.shutdownDeadlineMs`. */
  readonly shutdownDeadlineMs: number;
  /**
   * Closed last by `shutdown()` (the native `Agent`), with what is left of the shutdown's deadline for
   * its peers to acknowledge the closing of their endpoints.
   */
  readonly agent?: ClosableAgent;
  /**
   * Withdraws this worker's rank parts from discovery, first thing (e.g. `withdraw()` of
   * `startRankPublication`, or `withdrawRankParts` of `@kvreuse/registry`): the worker turns not ready.
   * Given the step's deadline: the step fails once it passes.
   */
  readonly withdrawRankParts?: (deadline: StepDeadline) => Promise<unknown>;
  /**
   * Withdraws this worker's retained inventory, right after (e.g. `InventoryPublisher.withdraw()`): routers stop
   * choosing it. Given the step's deadline, as `withdrawRankParts` is.
   */
  readonly withdrawInventory?: (deadline: StepDeadline) => Promise<unknown>;
  /** Waits for readers' pins after the withdrawals (the endpoint supplies it); without it, nothing is waited for. */
  readonly waitForReaders?: WaitForReaders;
}

export interface DrainOptions {
  /**
   * How long the whole drain gets, withdrawals and readers included: the withdrawals get at most a
   * quarter of it, readers at most half of what is left after them; at nine tenths of the rest (at
   * most 250 ms before the deadline) in-flight operations still live are cancelled; at the deadline
   * those whose cancel the native layer has not confirmed are quarantined.
   */
  readonly deadlineMs: number;
}

/** Time kept back from a shutdown's deadline for the steps after the drain: a tenth, at most a second. */
const POST_DRAIN_RESERVE_CAP_MS = 1000;
/** The withdrawals together get at most this fraction (1/n) of a drain's time. */
const WITHDRAWAL_SHARE = 4;
/** Time between a drain's cancels and its quarantine: a tenth of what is left for it, at most 250 ms. */
const CANCEL_GRACE_CAP_MS = 250;

function checkDeadline(option: string, value: unknown): number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw new InvalidDrainOptionError(option, value, 'must be a non-negative integer number of milliseconds');
  }
  return value as number;
}

function checkHook<Hook>(option: string, value: Hook | undefined): Hook | undefined {
  if (value !== undefined && typeof value !== 'function')
    throw new InvalidDrainOptionError(option, value, 'must be a function when given');
  return value;
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function readersOutcomeOf(value: unknown): ReadersOutcome | undefined {
  const outcome = value as Partial<ReadersOutcome> | undefined;
  return typeof outcome === 'object' &&
    outcome !== null &&
    isCount(outcome.released) &&
    isCount(outcome.lapsed) &&
    isCount(outcome.outstanding)
    ? { released: outcome.released, lapsed: outcome.lapsed, outstanding: outcome.outstanding }
    : undefined;
}

const ok = (detail: string): ShutdownStepOutcome => ({ outcome: 'ok', detail });
const failed = (error: string): ShutdownStepOutcome => ({ outcome: 'failed', error });
const skipped = (reason: string): ShutdownStepOutcome => ({ outcome: 'skipped', reason });

/**
 * Drain and ordered shutdown of one worker's banks and operations, source side first: nobody may
 * find or start reading memory that is about to be handed back.
 *
 * `drain({ deadlineMs })` runs, in this order: withdraw the rank parts (the worker turns not ready)
 * → withdraw the retained inventory (routers stop choosing it) → wait for readers' pins (the
 * `waitForReaders` hook) → stop intake (later posts fail with `DRAINING`) → drain in-flight
 * operations (cancel, then quarantine what is still live at the deadline) → deregister every bank in
 * reverse registration order → hand each back to its owner. A bank a live operation still references
 * is retained and reported with why. A step that fails is reported and never skips the steps after
 * it: a failed withdrawal still drains, deregisters and hands back (the parts then vanish when their
 * lease expires).
 *
 * `shutdown()` runs the same drain with the peers invalidated between the drain and the
 * deregistration, then destroys the agent. Both are idempotent (every call returns the first call's
 * result); every step is recorded as it runs, with its start, duration and outcome. If quarantined
 * operations keep the agent alive, their later quiescence hands their banks back and destroys the
 * agent (`released`, `agent-destroyed` events).
 */
export class DrainController<Request extends LedgerPostRequest = LedgerPostRequest> {
  readonly #ledger: OperationLedger<Request>;
  readonly #shutdownDeadlineMs: number;
  readonly #agent: ClosableAgent | undefined;
  readonly #withdrawRankParts: ((deadline: StepDeadline) => Promise<unknown>) | undefined;
  readonly #withdrawInventory: ((deadline: StepDeadline) => Promise<unknown>) | undefined;
  readonly #waitForReaders: WaitForReaders | undefined;
  readonly #ranks: RegisteredRank[] = [];
  readonly #steps: ShutdownStepResult[] = [];
  readonly #listeners = new Listeners<DrainEvents>();
  #drain: Promise<DrainReport> | undefined;
  #shutdown: Promise<ShutdownResult> | undefined;
  #drained = false;
  #agentPending = false;

  constructor(options: DrainControllerOptions<Request>) {
    checkOptionsObject('options', options);
    if (!(options.ledger instanceof OperationLedger))
      throw new InvalidDrainOptionError('ledger', options.ledger, 'must be an OperationLedger');
    this.#ledger = options.ledger;
    this.#shutdownDeadlineMs = checkDeadline('transport.shutdownDeadlineMs', options.shutdownDeadlineMs);
    if (options.agent !== undefined) checkFunction('agent.close', checkOptionsObject('agent', options.agent).close);
    this.#agent = options.agent;
    this.#withdrawRankParts = checkHook('withdrawRankParts', options.withdrawRankParts);
    this.#withdrawInventory = checkHook('withdrawInventory', options.withdrawInventory);
    this.#waitForReaders = checkHook('waitForReaders', options.waitForReaders);
    this.#ledger.on('quiesced', (operation) => this.#onLateQuiescence(operation));
  }

  /** Records a registered rank; drain hands banks back in the reverse of the order ranks were added. */
  addRank(rank: RegisteredRank): void {
    checkRegisteredRank('rank', rank);
    if (this.#drain !== undefined)
      throw new InvalidDrainOptionError(
        'rank',
        { tpRank: rank.tpRank, ppRank: rank.ppRank },
        'cannot be added once draining began',
      );
    const shared = rank.banks.find((bank) => this.#ranks.some((added) => added.banks.includes(bank)));
    if (shared !== undefined)
      throw new InvalidDrainOptionError(
        'rank',
        { tpRank: rank.tpRank, ppRank: rank.ppRank },
        `holds a bank of a rank already added (${formatBank(shared.label())}): each bank is drained once`,
      );
    // Its banks as they are now: a bank the caller adds to its array afterwards is not drained twice.
    this.#ranks.push({ ...rank, banks: [...rank.banks] });
  }

  on<Event extends keyof DrainEvents>(event: Event, listener: DrainEvents[Event]): () => void {
    return this.#listeners.on(event, listener);
  }

  /** Drains once; later calls return the first call's report. */
  drain(options: DrainOptions): Promise<DrainReport> {
    const deadlineMs = checkDeadline('deadlineMs', checkOptionsObject('options', options).deadlineMs);
    this.#drain ??= this.#run(this.#ledger.clock.now() + deadlineMs, () => undefined);
    return this.#drain;
  }

  /** Shuts down once; later calls (a second signal, say) return the first call's result. */
  shutdown(options: { readonly deadlineMs?: number } = {}): Promise<ShutdownResult> {
    const deadlineMs = checkDeadline(
      'deadlineMs',
      checkOptionsObject('options', options).deadlineMs ?? this.#shutdownDeadlineMs,
    );
    this.#shutdown ??= this.#runShutdown(deadlineMs);
    return this.#shutdown;
  }

  async #runShutdown(deadlineMs: number): Promise<ShutdownResult> {
    const shutdownDeadlineAt = this.#ledger.clock.now() + deadlineMs;
    const drainDeadlineAt =
      this.#ledger.clock.now() + deadlineMs - Math.min(Math.floor(deadlineMs / 10), POST_DRAIN_RESERVE_CAP_MS);
    let peersInvalidated = false;
    const invalidatePeers = () => {
      peersInvalidated = true;
      this.#runStep('invalidate-peers', () => {
        const peers = this.#ledger.peers.invalidateAll();
        return ok(peers.length > 0 ? peers.join(', ') : 'no peers');
      });
    };
    // Peers are invalidated between the drain and the deregistration; after an earlier drain()
    // (which does not invalidate them) they are invalidated now.
    const report = await (this.#drain ??= this.#run(drainDeadlineAt, invalidatePeers));
    if (!peersInvalidated) invalidatePeers();
    const live = this.#ledger.counts().live;
    const destroyed = await this.#awaitStep('destroy-agent', () => this.#destroyAgent(live, shutdownDeadlineAt));
    const banksRetained = this.#ranks.flatMap((rank) => rank.banks).flatMap((bank) => retentionOf(bank) ?? []);
    return {
      steps: [...this.#steps],
      report,
      banksRetained,
      quarantined: this.#ledger.quarantined(),
      retained: banksRetained.length > 0 || live > 0 || destroyed.outcome === 'failed',
      agentDestroyed: destroyed.outcome === 'ok',
    };
  }

  async #destroyAgent(liveOperations: number, deadlineAt: number): Promise<ShutdownStepOutcome> {
    if (this.#agent === undefined) return skipped('no agent was given');
    if (liveOperations > 0) {
      this.#agentPending = true;
      return failed(`kept: ${liveOperations} quarantined operations are not terminal`);
    }
    try {
      await this.#agent.close({ deadlineMs: Math.max(0, Math.ceil(deadlineAt - this.#ledger.clock.now())) });
      return ok('destroyed');
    } catch (error) {
      this.#agentPending = true;
      return failed(`kept: ${messageOf(error)}`);
    }
  }

  /**
   * The drain, in order. Steps without a hook are recorded as skipped at once, so that with no hook
   * given intake stops in the same turn as `drain()` is called.
   */
  async #run(deadlineAt: number, beforeDeregistration: () => void): Promise<DrainReport> {
    const ledger = this.#ledger;
    const clock = ledger.clock;
    const firstStep = this.#steps.length;
    // A discovery that hangs must not eat the time of the worker's own operations.
    const withdrawnBy = clock.now() + Math.floor(Math.max(0, deadlineAt - clock.now()) / WITHDRAWAL_SHARE);
    const withdrawRankParts = this.#withdrawRankParts;
    if (withdrawRankParts === undefined)
      this.#runStep('withdraw-rank-parts', () => skipped('no withdrawRankParts was given'));
    else
      await this.#awaitStep('withdraw-rank-parts', () =>
        this.#hookBefore(withdrawRankParts, withdrawnBy).then(() => ok('withdrawn')),
      );
    const withdrawInventory = this.#withdrawInventory;
    if (withdrawInventory === undefined)
      this.#runStep('withdraw-inventory', () => skipped('no withdrawInventory was given'));
    else
      await this.#awaitStep('withdraw-inventory', () =>
        this.#hookBefore(withdrawInventory, withdrawnBy).then(() => ok('withdrawn')),
      );
    let readers: ReadersOutcome | undefined;
    const waitForReaders = this.#waitForReaders;
    if (waitForReaders === undefined) this.#runStep('wait-for-readers', () => skipped('no waitForReaders was given'));
    else {
      await this.#awaitStep('wait-for-readers', async () => {
        readers = await this.#waitFor(
          waitForReaders,
          clock.now() + Math.floor(Math.max(0, deadlineAt - clock.now()) / 2),
        );
        const counts = `${readers.released} released, ${readers.lapsed} lapsed`;
        return readers.outstanding === 0
          ? ok(counts)
          : failed(`${readers.outstanding} pins still held at the deadline (${counts})`);
      });
    }

    this.#runStep('stop-intake', () => {
      ledger.stopIntake();
      return ok('new operations fail with DRAINING');
    });
    const before = ledger.counts();
    await this.#awaitStep('drain', () => this.#settleOperations(deadlineAt, before));
    const after = ledger.counts();
    beforeDeregistration();
    // From here on, a quarantined operation that quiesces releases its own banks.
    this.#drained = true;
    let deregistration: Awaited<ReturnType<typeof deregister>> | undefined;
    await this.#awaitStep('deregister', async () => {
      deregistration = await deregister(this.#ranks.flatMap((rank) => rank.banks).reverse());
      return deregistrationOutcome(deregistration.deregistered.length, deregistration.retained);
    });
    const retained = [...(deregistration?.retained ?? [])];
    const returned: BankLabel[] = [];
    await this.#awaitStep('hand-back', async () => {
      const handedBack = await returnBanks(deregistration?.deregistered ?? []);
      returned.push(...handedBack.returned);
      const refused = handedBack.unreturned;
      retained.push(...refused);
      return handBackOutcome(returned.length, refused);
    });
    return {
      completed: after.completed - before.completed,
      cancelled: after.cancelled - before.cancelled,
      failed: after.failed - before.failed,
      quarantined: ledger.quarantined(),
      banksReturned: returned,
      banksRetained: retained,
      readers,
      steps: this.#steps.slice(firstStep),
    };
  }

  /**
   * The drain step: waits for the operations to settle (cancelling a little before the deadline,
   * quarantining what is still live at it) and reports what became of those counted in `before`.
   */
  async #settleOperations(deadlineAt: number, before: LedgerCounts): Promise<ShutdownStepOutcome> {
    const ledger = this.#ledger;
    const remainingMs = Math.max(0, deadlineAt - ledger.clock.now());
    // Cancels go out a little before the deadline, so that the native layer can confirm them in time.
    const cancelAt = deadlineAt - Math.min(Math.floor(remainingMs / 10), CANCEL_GRACE_CAP_MS);
    await ledger.settle(cancelAt, deadlineAt, `not quiescent at the drain deadline (${remainingMs} ms)`);
    ledger.stopTimers();
    const after = ledger.counts();
    const quarantined = ledger.quarantined().length;
    const counts = `${after.completed - before.completed} completed, ${after.cancelled - before.cancelled} cancelled, ${after.failed - before.failed} failed`;
    return quarantined === 0
      ? ok(counts)
      : failed(`${quarantined} operations quarantined (not quiescent at the deadline); ${counts}`);
  }

  /** Runs a synchronous step and records it; a throw is the step's failure. */
  #runStep(step: ShutdownStep, run: () => ShutdownStepOutcome): ShutdownStepOutcome {
    const startedAt = this.#ledger.clock.now();
    let outcome: ShutdownStepOutcome;
    try {
      outcome = run();
    } catch (error) {
      outcome = failed(messageOf(error));
    }
    this.#steps.push({ step, startedAt, durationMs: this.#ledger.clock.now() - startedAt, ...outcome });
    return outcome;
  }

  /** Runs an asynchronous step and records it once it ended; a rejection is the step's failure. */
  async #awaitStep(step: ShutdownStep, run: () => Promise<ShutdownStepOutcome>): Promise<ShutdownStepOutcome> {
    const startedAt = this.#ledger.clock.now();
    let outcome: ShutdownStepOutcome;
    try {
      outcome = await run();
    } catch (error) {
      outcome = failed(messageOf(error));
    }
    this.#steps.push({ step, startedAt, durationMs: this.#ledger.clock.now() - startedAt, ...outcome });
    return outcome;
  }

  /** Calls the readers' hook with its deadline, aborts its signal then, and checks what it resolved with. */
  async #waitFor(waitForReaders: WaitForReaders, deadlineAt: number): Promise<ReadersOutcome> {
    const value: unknown = await this.#hookBefore(waitForReaders, deadlineAt);
    const outcome = readersOutcomeOf(value);
    if (outcome === undefined)
      throw new Error(
        `waitForReaders resolved with ${describeValue(value)}, not { released, lapsed, outstanding } counts`,
      );
    return outcome;
  }

  /**
   * Calls `hook` with its deadline and settles like it, or, once the deadline passes first, aborts its signal
   * and rejects with the deadline's own error. That rejection waits for the next turn of the event loop, so
   * that a hook whose promise rejects from the abort's listener is reported with its own error even when
   * `async` functions wrapping it take some turns of the microtask queue to pass its rejection on.
   */
  async #hookBefore<Value>(hook: (deadline: StepDeadline) => Promise<Value>, deadlineAt: number): Promise<Value> {
    const clock = this.#ledger.clock;
    const abort = new AbortController();
    const timeoutMs = Math.max(0, deadlineAt - clock.now());
    let timer: unknown;
    try {
      return await Promise.race([
        hook({ deadlineAt, timeoutMs, signal: abort.signal }),
        new Promise<never>((_, reject) => {
          timer = clock.setTimer(
            () => {
              const error = new Error('the deadline passed first');
              abort.abort(error);
              setImmediate(() => reject(error));
            },
            Math.max(0, deadlineAt - clock.now()),
          );
        }),
      ]);
    } finally {
      clock.clearTimer(timer);
    }
  }

  #onLateQuiescence(operation: LedgerOperation): void {
    if (!this.#drained) return;
    void handBanksBack([...operation.banks].reverse()).then(({ returned, retained }) => {
      this.#listeners.emit('released', operation, returned, retained);
      if (this.#agentPending && this.#agent !== undefined && this.#ledger.counts().live === 0) {
        this.#agentPending = false;
        this.#agent.close({ deadlineMs: this.#shutdownDeadlineMs }).then(
          () => this.#listeners.emit('agent-destroyed'),
          () => {
            this.#agentPending = true; // still busy (another retained bank's registration): kept until the process exits
          },
        );
      }
    });
  }
}

/** The deregister step's outcome: failed when any bank was retained. */
function deregistrationOutcome(deregistered: number, retained: readonly RetainedBank[]): ShutdownStepOutcome {
  return retained.length === 0
    ? ok(`${deregistered} banks deregistered`)
    : failed(
        `${retained.length} banks retained (${retained.map(({ reason }) => reason).join('; ')}); ${deregistered} deregistered`,
      );
}

/** The hand-back step's outcome: failed when any owner refused its bank back. */
function handBackOutcome(returned: number, refused: readonly RetainedBank[]): ShutdownStepOutcome {
  return refused.length === 0
    ? ok(`${returned} banks handed back`)
    : failed(
        `${refused.length} owners refused their bank back (${refused.map(({ reason }) => reason).join('; ')}); ${returned} handed back`,
      );
}

/**
 * Deregisters the given banks in order (the registry's `deregisterBanks`). A bank still referenced by
 * a live operation is first retained as a quarantine (never deregistered, never handed back); a bank
 * the native layer refuses to deregister is retained.
 */
async function deregister(
  banks: readonly Bank[],
): Promise<{ deregistered: readonly Bank[]; retained: RetainedBank[] }> {
  // Retained before anything else, so that no quiescence can release them in between.
  const referenced = banks
    .filter((bank) => bank.state !== 'returned' && bank.references > 0)
    .map((bank): RetainedBank => {
      bank.retain(`still referenced by ${bank.references} live operations at drain`, 'quarantine');
      return {
        bank: bank.label(),
        retainedBy: 'quarantine',
        reason: bank.retainedReason ?? `referenced by ${bank.references} live operations`,
      };
    });
  const { deregistered, retained } = await deregisterBanks(banks);
  return { deregistered, retained: [...referenced, ...retained] };
}

/** Deregisters the given banks in order, then hands each back to its owner (for a late quiescence). */
async function handBanksBack(banks: readonly Bank[]): Promise<{ returned: BankLabel[]; retained: RetainedBank[] }> {
  const { deregistered, retained } = await deregister(banks);
  const { returned, unreturned } = await returnBanks(deregistered);
  return { returned: [...returned], retained: [...retained, ...unreturned] };
}

/**
 * What keeps a bank that shutdown did not hand back: its retention, or its owner's refusal (left
 * releasing). A bank left in any other state was changed outside the drain; what it holds is not
 * known, so it is reported like a native refusal: release it explicitly.
 */
function retentionOf(bank: Bank): RetainedBank | undefined {
  const label = bank.label();
  if (bank.state === 'returned') return undefined;
  if (bank.state === 'retained')
    return { bank: label, retainedBy: bank.retainedBy ?? 'native-refusal', reason: bank.retainedReason ?? 'retained' };
  if (bank.state === 'releasing' && bank.region === undefined) {
    return { bank: label, retainedBy: 'owner-refusal', reason: 'deregistered, but its owner refused it back' };
  }
  return { bank: label, retainedBy: 'native-refusal', reason: `left ${bank.state} outside the drain` };
}
