import type { SettingsOf } from '@kvreuse/config';
import type { transportGroup } from '@kvreuse/native-bindings';
import type { TransferTemplate } from '@kvreuse/descriptors';
import { type Bank, type BankLabel, type BankReference, formatBank } from '@kvreuse/registry';
import { type Clock, systemClock } from './clock.js';
import { type Deadline, DeadlineScheduler } from './deadline-scheduler.js';
import {
  DrainingError,
  ForeignBankError,
  InvalidDrainOptionError,
  OperationFailedError,
  OperationRefusedError,
  OperationTimedOutError,
} from './errors.js';
import { Listeners } from './listeners.js';
import {
  checkBankList,
  checkClock,
  checkClockTime,
  checkFunction,
  checkNonEmptyString,
  checkOptionsObject,
} from './options.js';
import { PeerBook, type PeerTicket } from './peer-book.js';
import { Settlement } from './settlement.js';

/** The part of a native operation (`Operation` of `@kvreuse/native-bindings`) the ledger drives. */
export interface NativeOperation {
  readonly id: bigint;
  /** Settles once the native layer reports the operation terminal (rejects with its error code). */
  readonly done: Promise<{ readonly bytesDone: number }>;
  cancel(): 'requested' | 'already-terminal';
  /** Frees the native id; refused (BUSY) while the operation is in progress. */
  release(): void;
  status(): { readonly state: 'in-progress' | 'done' | 'failed'; readonly code?: string; readonly bytesDone: number };
}

/**
 * What the ledger reads of a post request (`PostRequest` of `@kvreuse/native-bindings`). Each local
 * region must be the very `Region` object a bank of the post holds (`bank.region`).
 */
export interface LedgerPostRequest {
  readonly peer: object;
  readonly localRegions: readonly { readonly id: number }[];
  readonly remoteRegions: readonly number[] | Uint32Array;
}

/** What the ledger reads of a registered template (`RegisteredTemplate` of `@kvreuse/native-bindings`). */
export interface LedgerTemplate {
  readonly peer: object;
  readonly template: Pick<TransferTemplate, 'pairs' | 'pairRouteStart' | 'sourceBank' | 'destinationBank'>;
  readonly pair: number;
  /** `read`: the ledger's agent holds the pair's destination rank; `write`: its source rank. */
  readonly direction: 'read' | 'write';
}

/** What the ledger reads of a post by block lists (`PostBlocksRequest` of `@kvreuse/native-bindings`). */
export interface LedgerBlocksRequest {
  readonly template: LedgerTemplate;
  readonly sourceBlocks: Uint32Array;
  readonly destinationBlocks: Uint32Array;
}

/** The part of a native agent (`Agent` of `@kvreuse/native-bindings`) the ledger posts through. */
export interface LedgerAgent<
  Request extends LedgerPostRequest,
  BlocksRequest extends LedgerBlocksRequest = LedgerBlocksRequest,
> {
  readonly name: string;
  post(request: Request): NativeOperation;
  /** Needed only for `OperationLedger.postBlocks`. */
  postBlocks?(request: BlocksRequest): NativeOperation;
}

/** The deadlines of `transport.*` settings (a resolved `settings.transport` fits). */
export type LedgerTimeouts = Pick<
  SettingsOf<[typeof transportGroup]>['transport'],
  'operationTimeoutMs' | 'abandonTimeoutMs'
>;

export interface OperationLedgerOptions<
  Request extends LedgerPostRequest,
  BlocksRequest extends LedgerBlocksRequest = LedgerBlocksRequest,
> {
  readonly agent: LedgerAgent<Request, BlocksRequest>;
  readonly peers: PeerBook;
  readonly timeouts: LedgerTimeouts;
  readonly clock?: Clock;
}

export interface PostOptions {
  /** The peer the work was prepared for (from `PeerBook.ticket`); fenced if the peer changed since. */
  readonly ticket: PeerTicket;
  /**
   * Every bank the operation may touch; each must be `registered` with the ledger's agent, and
   * together they must hold every region of `localRegions` (the same `Region` objects, not just ids).
   */
  readonly banks: readonly Bank[];
}

/** What the request that posted the operation learns. Late success never replaces a failure. */
export type OperationOutcome =
  | { readonly ok: true; readonly bytesDone: number }
  | { readonly ok: false; readonly error: OperationFailedError | OperationTimedOutError };

export type TerminalState = 'done' | 'cancelled' | 'failed';

/** How the operation ended natively: only then are its banks released. */
export interface Quiescence {
  readonly terminal: TerminalState;
  /** The native error code (`CANCELED`, `REMOTE_DISCONNECT`, …) for a failed or cancelled operation. */
  readonly code?: string;
  readonly bytesDone: number;
  /** The native layer reported success after the request had already failed. */
  readonly late: boolean;
  /** It had been quarantined before the native layer proved it terminal. */
  readonly quarantined: boolean;
}

/**
 * `timed-out`: the request failed by a deadline (the operation timeout, or a drain's) and a cancel
 * was requested; the operation still holds its banks.
 */
export type OperationPhase = 'in-flight' | 'timed-out' | 'quarantined' | 'quiescent';

/** An operation as the ledger records it. */
export interface LedgerOperation {
  /** `<agent name>#<native id>`. */
  readonly id: string;
  readonly nativeId: bigint;
  readonly peer: string;
  readonly banks: readonly Bank[];
  readonly localRegions: readonly number[];
  /** The request's remote regions; empty for a template post (its native template holds them). */
  readonly remoteRegions: readonly number[];
  /** Block pairs of a template post; undefined for an explicit post. */
  readonly blockPairs: number | undefined;
  readonly postedAt: number;
  readonly phase: OperationPhase;
  /** Why it was quarantined, while it is. */
  readonly quarantineReason: string | undefined;
  /** The logical result; never rejects. */
  readonly outcome: Promise<OperationOutcome>;
  /** Settles once the native layer proved it terminal and the ledger released it; never rejects. */
  readonly quiescence: Promise<Quiescence>;
}

export interface QuarantinedOperation {
  readonly id: string;
  readonly peer: string;
  readonly banks: readonly BankLabel[];
  readonly reason: string;
}

export interface LedgerEvents {
  /** The operation was posted: its banks are referenced and its deadlines run. Called within `post` or `postBlocks`, before it returns. */
  posted: (operation: LedgerOperation) => void;
  /** The operation's request failed by timeout; it was cancelled (and its peer probed). */
  'timed-out': (operation: LedgerOperation) => void;
  /** Past the abandon deadline without being terminal: its banks are retained. */
  quarantined: (operation: LedgerOperation) => void;
  /**
   * A quarantined operation became terminal after all: its bank references are released and, unless
   * intake is stopped, its banks nothing else holds are already reinstated (`registered` again).
   */
  quiesced: (operation: LedgerOperation, quiescence: Quiescence) => void;
}

/** Cumulative and live figures of a ledger. */
export interface LedgerCounts {
  readonly live: number;
  readonly quarantined: number;
  readonly posted: number;
  readonly completed: number;
  readonly cancelled: number;
  readonly failed: number;
  readonly timedOut: number;
  readonly lateSuccesses: number;
}

/** The regions a post records of its request. */
type PostRegions = Pick<LedgerOperation, 'localRegions' | 'remoteRegions' | 'blockPairs'>;
/** What a post records of its request, besides the native operation. */
type PostRecord = PostRegions & Pick<LedgerOperation, 'peer' | 'banks' | 'postedAt'>;

// The class carries the recorded fields of LedgerOperation (declared once, there).
interface Entry extends PostRecord {}

// One object per operation, its fields set in one order by the constructor: the ledger keeps thousands
// of them live, and promises, ids and result objects are made only for the operations someone looks at.
class Entry implements LedgerOperation {
  readonly nativeId: bigint;
  readonly native: NativeOperation;
  readonly references: BankReference[];
  readonly #agentName: string;
  #id: string | undefined;
  phase: OperationPhase = 'in-flight';
  quarantineReason: string | undefined = undefined;
  deadline: Deadline | undefined = undefined;
  cancelRequested = false;
  readonly #outcome = new Settlement<OperationOutcome>();
  readonly #quiescence = new Settlement<Quiescence>();

  constructor(
    agentName: string,
    peer: string,
    banks: readonly Bank[],
    regions: PostRegions,
    postedAt: number,
    native: NativeOperation,
    references: BankReference[],
  ) {
    const recorded = this as { -readonly [Field in keyof PostRecord]: PostRecord[Field] };
    recorded.peer = peer;
    recorded.banks = banks;
    recorded.localRegions = regions.localRegions;
    recorded.remoteRegions = regions.remoteRegions;
    recorded.blockPairs = regions.blockPairs;
    recorded.postedAt = postedAt;
    this.#agentName = agentName;
    this.native = native;
    this.nativeId = native.id;
    this.references = references;
  }

  get id(): string {
    this.#id ??= `${this.#agentName}#${this.nativeId}`;
    return this.#id;
  }

  get outcome(): Promise<OperationOutcome> {
    return this.#outcome.promise;
  }

  get quiescence(): Promise<Quiescence> {
    return this.#quiescence.promise;
  }

  get outcomeSettled(): boolean {
    return this.#outcome.settled;
  }

  settleOutcome(outcome: OperationOutcome): void {
    this.#outcome.settle(outcome);
  }

  settleQuiescence(quiescence: Quiescence): void {
    this.#quiescence.settle(quiescence);
  }
}

const nativeCodeOf = (error: unknown): string => {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : 'UNKNOWN';
};

function checkTimeouts(timeouts: LedgerTimeouts): void {
  checkOptionsObject('timeouts', timeouts);
  for (const field of ['operationTimeoutMs', 'abandonTimeoutMs'] as const) {
    const value: unknown = timeouts?.[field];
    if (!Number.isSafeInteger(value) || (value as number) <= 0) {
      throw new InvalidDrainOptionError(
        `transport.${field}`,
        value,
        'must be a positive integer number of milliseconds',
      );
    }
  }
  if (timeouts.abandonTimeoutMs <= timeouts.operationTimeoutMs) {
    throw new InvalidDrainOptionError(
      'transport.abandonTimeoutMs',
      timeouts.abandonTimeoutMs,
      `must exceed transport.operationTimeoutMs (${timeouts.operationTimeoutMs}): a cancelled operation needs time to become terminal`,
    );
  }
}

/**
 * Records every native operation with the banks, regions and peer it touches. Each touched bank holds
 * a reference until the operation is quiescent — done, terminal error, or cancel confirmed by the
 * native layer — however the request fared. At `operationTimeoutMs` the request fails, the operation
 * is cancelled and its peer probed and marked unhealthy; at `abandonTimeoutMs` an operation still not
 * terminal is quarantined: its banks are retained (never deregistered nor handed back), and if the
 * native layer later reports it terminal, its references are released, its banks that nothing else
 * holds are reinstated (put back in service) unless intake is stopped, and `quiesced` fires.
 *
 * All deadlines share one timer (`DeadlineScheduler`); completions arrive through the native agent's
 * batched wake-up, as each operation's `done` settling.
 */
export class OperationLedger<
  Request extends LedgerPostRequest = LedgerPostRequest,
  BlocksRequest extends LedgerBlocksRequest = LedgerBlocksRequest,
> {
  readonly agent: LedgerAgent<Request, BlocksRequest>;
  readonly peers: PeerBook;
  readonly timeouts: LedgerTimeouts;
  readonly clock: Clock;
  readonly #scheduler: DeadlineScheduler;
  readonly #live = new Set<Entry>();
  /** How many of #live are quarantined: idleness and counts read it instead of walking #live. */
  #quarantinedLive = 0;
  /** The deadline callback of every operation's timeout (one function, the entry its subject). */
  readonly #timeOutEntry = (entry: Entry) => this.#timeOut(entry);
  readonly #listeners = new Listeners<LedgerEvents>();
  readonly #idleWaiters = new Set<() => void>();
  #intakeStopped = false;
  #counts = { posted: 0, completed: 0, cancelled: 0, failed: 0, timedOut: 0, lateSuccesses: 0 };

  constructor(options: OperationLedgerOptions<Request, BlocksRequest>) {
    checkOptionsObject('options', options);
    const agent = checkOptionsObject('agent', options.agent);
    checkNonEmptyString('agent.name', agent.name);
    checkFunction('agent.post', agent.post);
    if (!(options.peers instanceof PeerBook))
      throw new InvalidDrainOptionError('peers', options.peers, 'must be a PeerBook');
    checkTimeouts(options.timeouts);
    checkClock('clock', options.clock);
    this.agent = options.agent;
    this.peers = options.peers;
    this.timeouts = {
      operationTimeoutMs: options.timeouts.operationTimeoutMs,
      abandonTimeoutMs: options.timeouts.abandonTimeoutMs,
    };
    this.clock = options.clock ?? systemClock;
    this.#scheduler = new DeadlineScheduler(this.clock);
  }

  get intakeStopped(): boolean {
    return this.#intakeStopped;
  }

  counts(): LedgerCounts {
    return { live: this.#live.size, quarantined: this.#quarantinedLive, ...this.#counts };
  }

  /** Operations not yet quiescent (in flight, timed out or quarantined). */
  liveOperations(): LedgerOperation[] {
    return [...this.#live];
  }

  quarantined(): QuarantinedOperation[] {
    return [...this.#live]
      .filter((entry) => entry.phase === 'quarantined')
      .map((entry) => ({
        id: entry.id,
        peer: entry.peer,
        banks: entry.banks.map((bank) => bank.label()),
        reason: entry.quarantineReason ?? '',
      }));
  }

  on<Event extends keyof LedgerEvents>(event: Event, listener: LedgerEvents[Event]): () => void {
    return this.#listeners.on(event, listener);
  }

  /**
   * Posts one native operation after checking intake (`DrainingError`), the peer ticket
   * (`PeerFencedError`, `PeerUnhealthyError`) and the banks (`OperationRefusedError`), and takes a
   * reference on every bank. A post the native layer refuses releases them again.
   */
  post(request: Request, options: PostOptions): LedgerOperation {
    checkPost(request, options);
    const peer = this.#admit(request.peer, options);
    const banks = [...options.banks];
    checkBanks(banks, this.agent.name);
    checkRegionsCovered(banks, request.localRegions, this.agent.name);
    const localRegions = new Array<number>(request.localRegions.length);
    for (let index = 0; index < localRegions.length; index++)
      localRegions[index] = (request.localRegions[index] as { id: number }).id;
    return this.#record(
      options,
      banks,
      { localRegions, remoteRegions: Array.from(request.remoteRegions), blockPairs: undefined },
      request,
      undefined,
    );
  }

  /**
   * Posts one request by block lists on a registered template (`agent.postBlocks`) with the same
   * checks, references, deadlines, quarantine and quiescence as `post`. `options.banks` must hold every
   * bank of the ledger agent's rank that the template's pair touches (by rank and bank number).
   */
  postBlocks(request: BlocksRequest, options: PostOptions): LedgerOperation {
    const postBlocks = this.agent.postBlocks;
    if (typeof postBlocks !== 'function')
      throw new OperationRefusedError('agent.postBlocks', undefined, "the ledger's agent cannot post on templates");
    checkOptionsObject('request', request);
    const template = checkOptionsObject('request.template', request.template);
    checkPostOptions(options);
    this.#admit(template.peer, options);
    const banks = [...options.banks];
    checkBanks(banks, this.agent.name);
    checkTemplateBanksCovered(banks, template);
    return this.#record(
      options,
      banks,
      {
        localRegions: banks.map((bank) => (bank.region as { id: number }).id),
        remoteRegions: [],
        blockPairs: request.sourceBlocks?.length ?? 0,
      },
      request,
      postBlocks,
    );
  }

  /** Checks intake and the ticket; returns the native peer the ticket admits after checking it is the request's. */
  #admit(requestPeer: object, options: PostOptions): object {
    if (this.#intakeStopped) throw new DrainingError('post an operation');
    const peer = this.peers.admit(options.ticket);
    if (requestPeer !== peer) {
      throw new OperationRefusedError('request.peer', options.ticket.name, 'is not the native peer the ticket names');
    }
    return peer;
  }

  /**
   * Takes a reference on every bank, posts (`agent.post(request)`, or `postBlocks` on the agent), and
   * records the operation; a refused post releases the references again.
   */
  #record(
    options: PostOptions,
    banks: Bank[],
    regions: PostRegions,
    request: Request | BlocksRequest,
    postBlocks: ((request: BlocksRequest) => NativeOperation) | undefined,
  ): LedgerOperation {
    const references = new Array<BankReference>(banks.length);
    for (let index = 0; index < banks.length; index++) references[index] = (banks[index] as Bank).acquire();
    let native: NativeOperation;
    try {
      native =
        postBlocks === undefined
          ? this.agent.post(request as Request)
          : postBlocks.call(this.agent, request as BlocksRequest);
    } catch (error) {
      for (const reference of references) reference.release();
      if (nativeCodeOf(error) === 'REMOTE_DISCONNECT')
        this.peers.markUnhealthy(options.ticket.name, 'a post failed with REMOTE_DISCONNECT');
      throw error;
    }
    const entry = new Entry(this.agent.name, options.ticket.name, banks, regions, this.clock.now(), native, references);
    this.#live.add(entry);
    this.#counts.posted += 1;
    entry.deadline = this.#scheduler.schedule(
      entry.postedAt + this.timeouts.operationTimeoutMs,
      this.#timeOutEntry,
      entry,
    );
    this.#listeners.emit('posted', entry);
    native.done.then(
      ({ bytesDone }) => this.#quiesce(entry, 'done', bytesDone),
      (error: unknown) => {
        const code = nativeCodeOf(error);
        const bytesDone = (error as { bytesDone?: unknown }).bytesDone;
        this.#quiesce(
          entry,
          code === 'CANCELED' ? 'cancelled' : 'failed',
          typeof bytesDone === 'number' ? bytesDone : 0,
          code,
        );
      },
    );
    return entry;
  }

  /** Stops intake: every later `post` fails at once with `DrainingError`. */
  stopIntake(): void {
    this.#intakeStopped = true;
  }

  /**
   * Waits until every operation is quiescent or quarantined. At `cancelAt` (clock time) the operations
   * still live are cancelled (their requests fail); those the native layer has not confirmed terminal
   * by `quarantineAt` are quarantined with `reason`. Times that are not finite, a `quarantineAt` before
   * `cancelAt` and a `reason` that is not a non-empty string are refused (`InvalidDrainOptionError`),
   * nothing cancelled.
   */
  async settle(cancelAt: number, quarantineAt: number, reason: string): Promise<void> {
    checkSettle(cancelAt, quarantineAt, reason);
    await this.#idleOr(cancelAt);
    for (const entry of [...this.#live]) if (entry.phase !== 'quarantined') this.#cancel(entry, reason);
    await this.#idleOr(quarantineAt);
    for (const entry of [...this.#live]) this.#quarantine(entry, reason);
  }

  /**
   * Gives up on `operation` before its timeout, when its caller no longer wants its bytes (e.g. the pin
   * on its source was lost): its outcome fails at once (`OperationTimedOutError` naming `why`), the
   * native layer is asked to cancel, and, as after a timeout, it is quarantined if it is still not
   * terminal `transport.abandonTimeoutMs` after it was posted. Its banks stay referenced until it is
   * quiescent. An operation already quiescent, or not this ledger's, is left as it is. A `why` that is
   * not a non-empty string is refused.
   */
  cancel(operation: LedgerOperation, why: string): void {
    checkNonEmptyString('why', why);
    if (!(operation instanceof Entry) || !this.#live.has(operation) || operation.phase !== 'in-flight') return;
    operation.deadline?.cancel();
    this.#cancel(operation, why);
    this.#abandonLater(operation);
  }

  /** Resolves once no operation is live except quarantined ones, or at `at`. */
  #idleOr(at: number): Promise<void> {
    if (!this.#hasUnquarantined() || at <= this.clock.now()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const deadline = this.#scheduler.schedule(at, () => {
        this.#idleWaiters.delete(idle);
        resolve();
      });
      const idle = () => {
        deadline.cancel();
        resolve();
      };
      this.#idleWaiters.add(idle);
    });
  }

  /** Cancels every pending deadline (the ledger keeps its records). */
  stopTimers(): void {
    this.#scheduler.clear();
  }

  #hasUnquarantined(): boolean {
    return this.#live.size > this.#quarantinedLive;
  }

  #timeOut(entry: Entry): void {
    if (entry.phase !== 'in-flight') return;
    // Ended natively, its completion not yet read: the JavaScript thread was held past the deadline (a long
    // synchronous call, a loaded machine) while the operation finished in time as far as it knows.
    if (this.#quiesceIfTerminal(entry)) return;
    entry.phase = 'timed-out';
    this.#counts.timedOut += 1;
    entry.settleOutcome({
      ok: false,
      error: new OperationTimedOutError(
        entry.id,
        entry.peer,
        this.timeouts.operationTimeoutMs,
        'transport.operationTimeoutMs',
      ),
    });
    this.peers.markUnhealthy(
      entry.peer,
      `operation ${entry.id} timed out after ${this.timeouts.operationTimeoutMs} ms`,
    );
    try {
      this.peers.probe(entry.peer);
    } catch {
      // A probe that cannot be answered says nothing more than the timeout already did.
    }
    this.#cancel(entry, 'transport.operationTimeoutMs');
    if (this.#abandonLater(entry)) this.#listeners.emit('timed-out', entry);
  }

  /** After a cancel: quarantines `entry` if it is still not terminal at its abandon deadline. False when #cancel found it terminal already. */
  #abandonLater(entry: Entry): boolean {
    if (entry.phase === 'quiescent') return false;
    entry.deadline = this.#scheduler.schedule(entry.postedAt + this.timeouts.abandonTimeoutMs, () =>
      this.#quarantine(
        entry,
        `operation ${entry.id} not terminal ${this.timeouts.abandonTimeoutMs} ms after it was posted (transport.abandonTimeoutMs)`,
      ),
    );
    return true;
  }

  /** Asks the native layer to cancel; if it is terminal already, quiesces it now from its status. */
  #cancel(entry: Entry, why: string): void {
    if (entry.phase === 'quiescent') return;
    if (entry.phase === 'in-flight') entry.phase = 'timed-out';
    if (!entry.outcomeSettled) {
      entry.settleOutcome({
        ok: false,
        error: new OperationTimedOutError(entry.id, entry.peer, Math.round(this.clock.now() - entry.postedAt), why),
      });
    }
    if (!entry.cancelRequested) {
      entry.cancelRequested = true;
      try {
        entry.native.cancel();
      } catch {
        // The status read below tells what state the operation is in.
      }
    }
    this.#quiesceIfTerminal(entry);
  }

  /** Quiesces `entry` from its native status when that says it is terminal (its completion not yet read): true then. */
  #quiesceIfTerminal(entry: Entry): boolean {
    let status: ReturnType<NativeOperation['status']>;
    try {
      status = entry.native.status();
    } catch {
      return false;
    }
    if (status.state === 'in-progress') return false;
    if (status.state === 'done') this.#quiesce(entry, 'done', status.bytesDone);
    else {
      const code = status.code ?? 'UNKNOWN';
      this.#quiesce(entry, code === 'CANCELED' ? 'cancelled' : 'failed', status.bytesDone, code);
    }
    return true;
  }

  #quarantine(entry: Entry, reason: string): void {
    if (entry.phase === 'quiescent' || entry.phase === 'quarantined') return;
    entry.deadline?.cancel();
    entry.phase = 'quarantined';
    this.#quarantinedLive += 1;
    entry.quarantineReason = reason;
    for (const bank of entry.banks) bank.retain(`quarantined: ${reason}`, 'quarantine');
    this.#listeners.emit('quarantined', entry);
    this.#checkIdle();
  }

  #quiesce(entry: Entry, terminal: TerminalState, bytesDone: number, code?: string): void {
    if (entry.phase === 'quiescent') return;
    const quarantined = entry.phase === 'quarantined';
    if (quarantined) this.#quarantinedLive -= 1;
    const late = terminal === 'done' && entry.outcomeSettled;
    entry.deadline?.cancel();
    entry.phase = 'quiescent';
    if (terminal === 'done') {
      this.#counts.completed += 1;
      if (late) this.#counts.lateSuccesses += 1;
      else entry.settleOutcome({ ok: true, bytesDone });
    } else {
      if (terminal === 'cancelled') this.#counts.cancelled += 1;
      else this.#counts.failed += 1;
      if (code === 'REMOTE_DISCONNECT')
        this.peers.markUnhealthy(entry.peer, `operation ${entry.id} ended with REMOTE_DISCONNECT`);
      if (!entry.outcomeSettled)
        entry.settleOutcome({
          ok: false,
          error: new OperationFailedError(entry.id, entry.peer, code ?? 'UNKNOWN', bytesDone),
        });
    }
    try {
      entry.native.release();
    } catch {
      // Terminal operations are always releasable; an agent closed under us has released it already.
    }
    for (const reference of entry.references) reference.release();
    // Outside a drain, banks a quarantine retained go back into service as soon as nothing holds
    // them; during or after one, the drain hands them back.
    if (!this.#intakeStopped) {
      for (const bank of entry.banks) {
        if (bank.state === 'retained' && bank.retainedBy === 'quarantine' && bank.references === 0) bank.reinstate();
      }
    }
    this.#live.delete(entry);
    const quiescence: Quiescence =
      code === undefined
        ? { terminal, bytesDone, late, quarantined }
        : { terminal, code, bytesDone, late, quarantined };
    entry.settleQuiescence(quiescence);
    if (quarantined) this.#listeners.emit('quiesced', entry, quiescence);
    this.#checkIdle();
  }

  #checkIdle(): void {
    if (this.#idleWaiters.size === 0 || this.#hasUnquarantined()) return;
    const waiters = [...this.#idleWaiters];
    this.#idleWaiters.clear();
    for (const waiter of waiters) waiter();
  }
}

function checkSettle(cancelAt: number, quarantineAt: number, reason: string): void {
  checkClockTime('cancelAt', cancelAt);
  checkClockTime('quarantineAt', quarantineAt);
  if (quarantineAt < cancelAt)
    throw new InvalidDrainOptionError(
      'quarantineAt',
      quarantineAt,
      `must not be before cancelAt (${cancelAt}): operations are cancelled before they are quarantined`,
    );
  checkNonEmptyString('reason', reason);
}

function checkPost(request: LedgerPostRequest, options: PostOptions): void {
  checkOptionsObject('request', request);
  if (!Array.isArray(request.localRegions))
    throw new InvalidDrainOptionError('request.localRegions', request.localRegions, 'must be an array of Regions');
  checkPostOptions(options);
}

function checkPostOptions(options: PostOptions): void {
  checkOptionsObject('options', options);
  const ticket = checkOptionsObject('options.ticket', options.ticket);
  checkNonEmptyString('options.ticket.name', ticket.name);
  checkNonEmptyString('options.ticket.incarnation', ticket.incarnation);
  if (typeof ticket.generation !== 'bigint')
    throw new InvalidDrainOptionError(
      'options.ticket.generation',
      ticket.generation,
      'must be a bigint (from PeerBook.ticket)',
    );
  checkBankList('options.banks', options.banks);
}

/** Refuses banks that are not in service, repeated, or registered with another agent than the ledger's. */
function checkBanks(banks: readonly Bank[], agentName: string): void {
  if (banks.length === 0) throw new OperationRefusedError('banks', [], 'an operation touches at least one local bank');
  for (let index = 0; index < banks.length; index++) {
    const bank = banks[index] as Bank;
    if (banks.indexOf(bank) !== index)
      throw new OperationRefusedError(`banks[${index}]`, formatBank(bank), 'appears twice');
    if (bank.state !== 'registered' || bank.region === undefined) {
      throw new OperationRefusedError(
        `banks[${index}]`,
        formatBank(bank),
        `is ${bank.state}, not registered: it cannot take new operations`,
      );
    }
    if (bank.agentName !== agentName) {
      throw new ForeignBankError(
        `banks[${index}]`,
        bank.label(),
        bank.agentName,
        agentName,
        bank.region.id,
        `is registered with another agent than the ledger's (${agentName})`,
      );
    }
  }
}

/**
 * Refuses a request whose local regions the banks do not all hold. A region is covered only by the
 * bank that holds that very region: region ids are per agent, so a bank of another agent (or another
 * registration) whose region has the same id covers nothing.
 */
function checkRegionsCovered(
  banks: readonly Bank[],
  localRegions: LedgerPostRequest['localRegions'],
  agentName: string,
): void {
  for (let index = 0; index < localRegions.length; index++) {
    const region = localRegions[index] as LedgerPostRequest['localRegions'][number];
    if (coveredBy(banks, region)) continue;
    const namesake = banks.find((bank) => bank.region?.id === region?.id);
    if (namesake !== undefined) {
      throw new ForeignBankError(
        `localRegions[${index}]`,
        namesake.label(),
        namesake.agentName,
        agentName,
        namesake.region?.id,
        `holds another registration than the request's region ${region.id}: the same id, not the same region`,
      );
    }
    throw new OperationRefusedError(
      `localRegions[${index}]`,
      region?.id,
      'is the region of none of the banks given; every touched region must be referenced',
    );
  }
}

function coveredBy(banks: readonly Bank[], region: object): boolean {
  for (let index = 0; index < banks.length; index++) if ((banks[index] as Bank).region === region) return true;
  return false;
}

/** Refuses a template post unless the banks hold every bank of the local rank the template's pair touches. */
function checkTemplateBanksCovered(banks: readonly Bank[], registered: LedgerTemplate): void {
  const { template, pair, direction } = registered;
  const route = template.pairs[pair];
  if (route === undefined)
    throw new OperationRefusedError(
      'request.template.pair',
      pair,
      `is not one of the template's ${template.pairs.length} rank pairs`,
    );
  const read = direction === 'read';
  const rank = read ? route.destinationRank : route.sourceRank;
  const bankNumbers = read ? template.destinationBank : template.sourceBank;
  const end = template.pairRouteStart[pair + 1] as number;
  for (let r = template.pairRouteStart[pair] as number; r < end; r++) {
    const index = bankNumbers[r] as number;
    if (banks.some((bank) => bank.tpRank === rank.tpRank && bank.ppRank === rank.ppRank && bank.index === index))
      continue;
    throw new OperationRefusedError(
      'banks',
      banks.map((bank) => formatBank(bank)),
      `hold no bank ${index} of rank (tp ${rank.tpRank}, pp ${rank.ppRank}), which route ${r} of the template's pair ${pair} ${read ? 'writes' : 'reads'}; every touched bank must be referenced`,
    );
  }
}
