// Model-based test: random interleavings of post, complete, fail, cancel confirmation, time passing,
// peer reload/restart, drain and shutdown, run against the ledger and drain controller (over real
// registry banks and the fake native layer, for speed) and checked against a model after every step.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DrainingError,
  type DrainReport,
  type LedgerOperation,
  OperationRefusedError,
  type OperationOutcome,
  PeerFencedError,
  PeerUnhealthyError,
  type ShutdownResult,
} from '../src/index.js';
import type { CancelMode, FakeOperation } from './support/fake-native.js';
import {
  fakeRequest,
  type FakeWorld,
  flush,
  openFakeWorld,
  PEER,
  SHUTDOWN_DEADLINE_MS,
  TIMEOUTS,
} from './support/fake-world.js';

const RANKS = 2;
const BANKS_PER_RANK = 2;
const BANKS = RANKS * BANKS_PER_RANK;
const INTERLEAVINGS = Number(process.env['DRAIN_MODEL_RUNS'] ?? 10_000);

type NativeState = 'in-progress' | 'done' | 'failed' | 'cancelled';

interface ModelOp {
  readonly postedAt: number;
  readonly banks: readonly number[];
  readonly cancelMode: CancelMode;
  native: NativeState;
  cancelRequested: boolean;
  /** The request failed by a deadline (its own timeout, or a drain's cancel). */
  timedOut: boolean;
  /** Timed out by its own deadline: the abandon deadline is armed. */
  abandonArmed: boolean;
  quarantined: boolean;
  /** What the request must have learnt: decided by whichever came first, completion or a deadline. */
  expected: 'ok' | 'failed' | undefined;
}

interface Model {
  now: number;
  readonly ops: ModelOp[];
  /** Banks retained by a quarantine and not yet reinstated. */
  readonly retained: Set<number>;
  peerHealthy: boolean;
  incarnation: number;
  drain:
    | { kind: 'drain' | 'shutdown'; cancelAt: number; quarantineAt: number; cancelled: boolean; settled: boolean }
    | undefined;
}

interface Real {
  readonly world: FakeWorld;
  /** Each bank's native registration and owner as registered: a reinstated bank keeps both. */
  readonly registrations: readonly unknown[];
  readonly owners: readonly unknown[];
  readonly ops: LedgerOperation[];
  readonly natives: FakeOperation[];
  readonly outcomes: (OperationOutcome | undefined)[];
  drainResult: DrainReport | undefined;
  shutdownResult: ShutdownResult | undefined;
  drainError: unknown;
}

const isActive = (op: ModelOp) => op.native === 'in-progress' && !op.quarantined;

function settleDrainIfIdle(model: Model): void {
  if (model.drain !== undefined && !model.drain.settled && !model.ops.some(isActive)) model.drain.settled = true;
}

/** How many banks the model saw reinstated, over all runs: the property must exercise it. */
let reinstatements = 0;

function nativeEnd(model: Model, op: ModelOp, state: Exclude<NativeState, 'in-progress'>): void {
  op.native = state;
  op.expected ??= state === 'done' ? 'ok' : 'failed';
  // Outside a drain, a retained bank nothing references any more is back in service at once.
  if (model.drain === undefined) {
    for (const bank of op.banks) {
      if (
        model.retained.has(bank) &&
        !model.ops.some((other) => other.native === 'in-progress' && other.banks.includes(bank))
      ) {
        model.retained.delete(bank);
        reinstatements += 1;
      }
    }
  }
  settleDrainIfIdle(model);
}

/** Moves the model's time forward, firing deadlines in time order (an operation's before a drain's on ties). */
function advanceModel(model: Model, ms: number): void {
  const target = model.now + ms;
  for (;;) {
    const events: { at: number; fire: () => void }[] = [];
    for (const op of model.ops) {
      if (!isActive(op)) continue;
      if (!op.timedOut) {
        events.push({
          at: op.postedAt + TIMEOUTS.operationTimeoutMs,
          fire: () => {
            op.timedOut = true;
            op.abandonArmed = true;
            op.expected ??= 'failed';
            model.peerHealthy = false;
            op.cancelRequested = true;
            if (op.cancelMode === 'immediate') nativeEnd(model, op, 'cancelled');
          },
        });
      } else if (op.abandonArmed) {
        events.push({ at: op.postedAt + TIMEOUTS.abandonTimeoutMs, fire: () => quarantine(model, op) });
      }
    }
    const drain = model.drain;
    if (drain !== undefined && !drain.settled && !drain.cancelled) {
      events.push({
        at: drain.cancelAt,
        fire: () => {
          drain.cancelled = true;
          for (const op of model.ops.filter(isActive)) {
            op.expected ??= 'failed';
            op.timedOut = true;
            op.cancelRequested = true;
            if (op.cancelMode === 'immediate') nativeEnd(model, op, 'cancelled');
          }
        },
      });
    }
    if (drain !== undefined && !drain.settled) {
      events.push({
        at: drain.quarantineAt,
        fire: () => {
          for (const op of model.ops.filter(isActive)) quarantine(model, op);
          drain.settled = true;
        },
      });
    }
    const due = events.filter((event) => event.at <= target).sort((a, b) => a.at - b.at)[0];
    if (due === undefined) break;
    model.now = Math.max(model.now, due.at);
    due.fire();
    settleDrainIfIdle(model);
  }
  model.now = target;
}

function quarantine(model: Model, op: ModelOp): void {
  op.quarantined = true;
  for (const bank of op.banks) model.retained.add(bank);
  settleDrainIfIdle(model);
}

function startDrain(model: Model, kind: 'drain' | 'shutdown', deadlineMs: number): void {
  const grace = Math.min(Math.floor(deadlineMs / 10), 250);
  model.drain ??= {
    kind,
    cancelAt: model.now + deadlineMs - grace,
    quarantineAt: model.now + deadlineMs,
    cancelled: false,
    settled: false,
  };
  settleDrainIfIdle(model);
  // Deadlines already due (a zero deadline) act at once.
  advanceModel(model, 0);
}

/** A cheap assertion for the hot path of the model check (vitest's expect is too slow for ~10⁶ calls). */
function same(actual: unknown, expected: unknown, what: string): void {
  if (actual !== expected) throw new Error(`${what}: expected ${String(expected)}, got ${String(actual)}`);
}

function throwsA(attempt: () => unknown, type: abstract new (...args: never[]) => Error): void {
  try {
    attempt();
  } catch (error) {
    if (error instanceof type) return;
    throw new Error(`expected ${type.name}, got ${String(error)}`);
  }
  throw new Error(`expected ${type.name}, nothing was thrown`);
}

async function check(model: Model, real: Real): Promise<void> {
  await flush();
  const { world } = real;
  same(world.native.violations.join('; '), '', 'native violations');
  model.ops.forEach((op, index) => {
    const ledgerOp = real.ops[index] as LedgerOperation;
    const native = real.natives[index] as FakeOperation;
    const expectedPhase =
      op.native !== 'in-progress'
        ? 'quiescent'
        : op.quarantined
          ? 'quarantined'
          : op.timedOut
            ? 'timed-out'
            : 'in-flight';
    same(ledgerOp.phase, expectedPhase, `phase of operation ${index}`);
    same(native.cancelRequested, op.cancelRequested, `cancel requested of operation ${index}`);
    // The first outcome the request saw; late success never turns a failure into a success.
    same(
      real.outcomes[index]?.ok,
      op.expected === undefined ? undefined : op.expected === 'ok',
      `outcome of operation ${index}`,
    );
    // A native operation is released exactly when it is terminal.
    same(native.released, op.native !== 'in-progress', `release of operation ${index}`);
  });
  for (const times of world.handedBack.values()) same(times, 1, 'hand-backs of a bank');
  const drained = real.drainResult !== undefined;
  same(drained, model.drain?.settled === true, 'drain finished');
  world.banks.forEach((bank, index) => {
    const referencedBy = model.ops.filter((op) => op.native === 'in-progress' && op.banks.includes(index)).length;
    same(bank.references, referencedBy, `references of bank ${index}`);
    if (bank.state === 'returned') same(referencedBy, 0, `live operations on returned bank ${index}`);
    if (!drained) {
      same(bank.state, model.retained.has(index) ? 'retained' : 'registered', `state of bank ${index}`);
      // Registered again after a reinstatement means: the same native registration, the same owner, never handed back.
      same(bank.region, real.registrations[index], `registration of bank ${index}`);
      same(bank.owner, real.owners[index], `owner of bank ${index}`);
      same(world.handedBack.has(bank), false, `hand-back of bank ${index} before the drain`);
    }
  });
  same(
    world.native.counters().liveOperations,
    model.ops.filter((op) => op.native === 'in-progress').length,
    'native live operations',
  );
}

class Post implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly banks: readonly number[],
    readonly cancelMode: CancelMode,
  ) {}
  check = () => true;
  async run(model: Model, real: Real): Promise<void> {
    const { world } = real;
    world.native.nextCancelMode = this.cancelMode;
    const attempt = () =>
      world.ledger.post(
        fakeRequest(
          world,
          this.banks.map((i) => world.banks[i]!),
        ),
        {
          ticket: world.book.ticket(PEER),
          banks: this.banks.map((i) => world.banks[i]!),
        },
      );
    if (model.drain !== undefined) {
      throwsA(attempt, DrainingError);
    } else if (!model.peerHealthy) {
      throwsA(attempt, PeerUnhealthyError);
    } else if (this.banks.some((bank) => model.retained.has(bank))) {
      throwsA(attempt, OperationRefusedError);
    } else {
      const operation = attempt();
      const index = real.ops.length;
      real.ops.push(operation);
      real.natives.push(world.native.operations.at(-1)!);
      real.outcomes.push(undefined);
      void operation.outcome.then((outcome) => (real.outcomes[index] = outcome));
      model.ops.push({
        postedAt: model.now,
        banks: this.banks,
        cancelMode: this.cancelMode,
        native: 'in-progress',
        cancelRequested: false,
        timedOut: false,
        abandonArmed: false,
        quarantined: false,
        expected: undefined,
      });
    }
    await check(model, real);
  }
  toString = () => `post(banks ${this.banks.join(',')}, cancel ${this.cancelMode})`;
}

/** Ends the `pick`-th in-progress native operation with `state`. */
class End implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly pick: number,
    readonly state: 'done' | 'REMOTE_DISCONNECT' | 'BACKEND' | 'confirm-cancel',
  ) {}
  #target(model: Model): number | undefined {
    const candidates = model.ops
      .map((op, index) => ({ op, index }))
      .filter(({ op }) => op.native === 'in-progress' && (this.state !== 'confirm-cancel' || op.cancelRequested));
    return candidates.length === 0 ? undefined : candidates[this.pick % candidates.length]!.index;
  }
  check = (model: Readonly<Model>) => this.#target(model as Model) !== undefined;
  async run(model: Model, real: Real): Promise<void> {
    const index = this.#target(model)!;
    const op = model.ops[index]!;
    const native = real.natives[index]!;
    if (this.state === 'done') {
      native.complete();
      nativeEnd(model, op, 'done');
    } else if (this.state === 'confirm-cancel') {
      native.fail('CANCELED');
      nativeEnd(model, op, 'cancelled');
    } else {
      native.fail(this.state);
      if (this.state === 'REMOTE_DISCONNECT') model.peerHealthy = false;
      nativeEnd(model, op, 'failed');
    }
    await check(model, real);
  }
  toString = () => `end(#${this.pick} ${this.state})`;
}

class Advance implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(model: Model, real: Real): Promise<void> {
    advanceModel(model, this.ms);
    real.world.clock.advance(this.ms);
    await check(model, real);
  }
  toString = () => `advance(${this.ms})`;
}

class ReloadPeer implements fc.AsyncCommand<Model, Real> {
  constructor(readonly restart: boolean) {}
  check = (model: Readonly<Model>) => model.drain === undefined;
  async run(model: Model, real: Real): Promise<void> {
    const { world } = real;
    const stale = world.book.ticket(PEER);
    if (this.restart) model.incarnation += 1;
    world.book.track(PEER, `incarnation-${model.incarnation}`, world.peer);
    model.peerHealthy = true;
    if (this.restart) {
      // Work prepared for the old incarnation is refused, not redirected.
      throwsA(
        () => world.ledger.post(fakeRequest(world, [world.banks[0]!]), { ticket: stale, banks: [world.banks[0]!] }),
        PeerFencedError,
      );
    }
    await check(model, real);
  }
  toString = () => (this.restart ? 'restart-peer' : 'reload-peer');
}

class Drain implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: 'drain' | 'shutdown',
    readonly deadlineMs: number,
  ) {}
  check = (model: Readonly<Model>) => model.drain === undefined;
  async run(model: Model, real: Real): Promise<void> {
    const { controller } = real.world;
    if (this.kind === 'drain') {
      startDrain(model, 'drain', this.deadlineMs);
      controller.drain({ deadlineMs: this.deadlineMs }).then(
        (report) => (real.drainResult = report),
        (error: unknown) => (real.drainError = error),
      );
    } else {
      startDrain(model, 'shutdown', SHUTDOWN_DEADLINE_MS - Math.min(Math.floor(SHUTDOWN_DEADLINE_MS / 10), 1000));
      controller.shutdown().then(
        (result) => {
          real.shutdownResult = result;
          real.drainResult = result.report;
        },
        (error: unknown) => (real.drainError = error),
      );
    }
    await check(model, real);
  }
  toString = () => `${this.kind}(${this.deadlineMs})`;
}

const commands = [
  fc
    .tuple(
      fc.subarray([...Array(BANKS).keys()], { minLength: 1, maxLength: 2 }),
      fc.constantFrom<CancelMode>('immediate', 'deferred'),
    )
    .map(([banks, mode]) => new Post(banks, mode)),
  fc
    .tuple(
      fc.nat(7),
      fc.constantFrom('done', 'done', 'REMOTE_DISCONNECT', 'BACKEND', 'confirm-cancel') as fc.Arbitrary<End['state']>,
    )
    .map(([pick, state]) => new End(pick, state)),
  // Now and then straight past the abandon deadline: quarantines outside a drain, whose banks come back into service.
  fc
    .oneof(
      { arbitrary: fc.integer({ min: 1, max: 180 }), weight: 3 },
      { arbitrary: fc.constant(TIMEOUTS.abandonTimeoutMs), weight: 1 },
    )
    .map((ms) => new Advance(ms)),
  fc.boolean().map((restart) => new ReloadPeer(restart)),
  fc
    .tuple(fc.constantFrom<'drain' | 'shutdown'>('drain', 'shutdown'), fc.integer({ min: 0, max: 300 }))
    .map(([kind, ms]) => new Drain(kind, ms)),
];

/** After the random steps: shut down (past every deadline), check what was retained, then let it all end. */
async function finish(model: Model, real: Real): Promise<void> {
  const { world } = real;
  // A shutdown among the random steps resolved with a snapshot of that moment; it is checked here
  // only when this call starts it.
  const startedHere = model.drain?.kind !== 'shutdown';
  const shutdown = world.controller.shutdown();
  for (let step = 0; step < 4 && real.drainError === undefined; step++) {
    world.clock.advance(SHUTDOWN_DEADLINE_MS);
    await flush();
  }
  const result = await shutdown;
  expect(real.drainError).toBeUndefined();
  expect(world.native.violations).toEqual([]);
  const live = world.ledger.counts().live;
  expect(world.ledger.counts().quarantined).toBe(live);
  // Native counters are back to zero except for what is quarantined.
  const counters = world.native.counters();
  expect(counters.liveOperations).toBe(live);
  const notReturned = world.banks.filter((bank) => bank.state !== 'returned');
  expect(counters.liveRegistrations).toBe(notReturned.length);
  for (const bank of notReturned) {
    expect(bank.state).toBe('retained');
    expect(bank.references).toBeGreaterThan(0);
    expect(world.handedBack.get(bank)).toBeUndefined();
  }
  if (startedHere) {
    expect(result.retained).toBe(live > 0);
    expect(result.agentDestroyed).toBe(live === 0);
    expect(result.quarantined.length).toBe(live);
    expect(result.banksRetained.length).toBe(notReturned.length);
    expect(result.steps.find((s) => s.step === 'destroy-agent')?.outcome).toBe(live === 0 ? 'ok' : 'failed');
  }
  // The native layer proves the quarantined operations terminal: their banks go back, the agent goes.
  for (const native of world.native.operations) native.complete();
  await flush();
  await flush();
  expect(world.native.violations).toEqual([]);
  expect(world.native.counters()).toEqual({ liveRegistrations: 0, liveOperations: 0, inflightOperations: 0 });
  for (const bank of world.banks) {
    expect(bank.state).toBe('returned');
    expect(world.handedBack.get(bank)).toBe(1);
  }
  expect(world.native.closed).toBe(true);
  expect(model.ops.length).toBe(real.ops.length);
}

describe('operation ledger and drain against a model', () => {
  it(`keeps every invariant over ${INTERLEAVINGS} random interleavings`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 16 }), async (steps) => {
        const world = await openFakeWorld(RANKS, BANKS_PER_RANK);
        const model: Model = {
          now: 0,
          ops: [],
          retained: new Set(),
          peerHealthy: true,
          incarnation: 1,
          drain: undefined,
        };
        const real: Real = {
          world,
          registrations: world.banks.map((bank) => bank.region),
          owners: world.banks.map((bank) => bank.owner),
          ops: [],
          natives: [],
          outcomes: [],
          drainResult: undefined,
          shutdownResult: undefined,
          drainError: undefined,
        };
        await fc.asyncModelRun(() => ({ model, real }), steps);
        await finish(model, real);
      }),
      { numRuns: INTERLEAVINGS },
    );
    // Quarantined banks were put back in service (and then took new operations) in many runs.

    expect(reinstatements).toBeGreaterThan(INTERLEAVINGS / 1000);
  }, 600_000);
});
