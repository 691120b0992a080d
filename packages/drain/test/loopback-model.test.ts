// The model-based interleavings again, fewer of them, against the REAL native layer (loopback
// backend): posts held by the native completion-delay fault, released in batches through the
// agent's wake-up channel, failures injected natively, deadlines on a manual clock, drain and
// shutdown. After every step the ledger, the registry banks and the native counters must agree.
import fc from 'fast-check';
import type { StatusCodeName } from '@kvreuse/native-bindings';
import { describe, expect, it } from 'vitest';
import { DrainingError, type LedgerOperation, OperationRefusedError, PeerUnhealthyError } from '../src/index.js';
import { liveCounters, type LoopbackWorld, nextTurn, openLoopbackWorld } from './support/loopback-world.js';
import { ManualClock } from './support/manual-clock.js';

const RUNS = Number(process.env['DRAIN_LOOPBACK_MODEL_RUNS'] ?? 400);
const TIMEOUTS = { operationTimeoutMs: 100, abandonTimeoutMs: 250 };
const STEP_MS = 4;

interface Real {
  readonly world: LoopbackWorld;
  readonly clock: ManualClock;
  readonly ops: LedgerOperation[];
  draining: Promise<unknown> | undefined;
}
type Model = { posted: number };

/**
 * Moves the manual clock in steps shorter than any cancel grace (a drain's is a tenth of its deadline),
 * waiting after each step for the cancels it caused to come back through the wake-up channel — as
 * they do in real time, where a clock does not jump.
 */
async function advance(real: Real, ms: number, until: () => boolean = () => false): Promise<void> {
  for (let elapsed = 0; elapsed < ms && !until(); elapsed += STEP_MS) {
    real.clock.advance(Math.min(STEP_MS, ms - elapsed));
    await settleCancels(real);
  }
}

/** Waits until every cancel the ledger requested has come back through the wake-up channel. */
async function settleCancels(real: Real): Promise<void> {
  // A deadline that just fired acts in a promise continuation: let it run first.
  await nextTurn();
  await Promise.all(real.ops.filter((op) => op.phase === 'timed-out').map((op) => op.quiescence));
  await nextTurn();
}

async function check(real: Real): Promise<void> {
  const { world } = real;
  const live = world.ledger.liveOperations();
  world.banks.forEach((bank, index) => {
    const holders = live.filter((op) => op.banks.includes(bank)).length;
    if (bank.references !== holders)
      throw new Error(`bank ${index}: ${bank.references} references, ${holders} live operations`);
    if (holders > 0 && bank.state === 'returned') throw new Error(`bank ${index} returned while referenced`);
  });
  if (world.reader.isOpen) {
    const counters = world.reader.counters();
    if (counters.liveOperations !== live.length)
      throw new Error(`native live operations ${counters.liveOperations}, ledger ${live.length}`);
  }
  for (const op of real.ops) {
    if (op.phase === 'quarantined')
      throw new Error(`operation ${op.id} quarantined, yet loopback confirms every cancel`);
  }
}

class Post implements fc.AsyncCommand<Model, Real> {
  constructor(readonly banks: readonly number[]) {}
  check = () => true;
  async run(model: Model, real: Real): Promise<void> {
    const { world } = real;
    const banks = this.banks.map((index) => world.banks[index]!);
    const attempt = () => world.ledger.post(world.request(banks), { ticket: world.ticket(), banks });
    if (real.draining !== undefined) expect(attempt).toThrow(DrainingError);
    else if (!world.book.health(world.source.name).healthy) expect(attempt).toThrow(PeerUnhealthyError);
    else if (banks.some((bank) => bank.state !== 'registered')) expect(attempt).toThrow(OperationRefusedError);
    else {
      real.ops.push(attempt());
      model.posted += 1;
    }
    await check(real);
  }
  toString = () => `post(${this.banks.join(',')})`;
}

class Release implements fc.AsyncCommand<Model, Real> {
  constructor(readonly failWith: StatusCodeName | undefined) {}
  check = () => true;
  async run(_model: Model, real: Real): Promise<void> {
    const { world } = real;
    if (!world.reader.isOpen) return;
    const live = world.ledger.liveOperations();
    if (this.failWith !== undefined && live.length > 0) world.reader.faults.failNth('completion', 1, this.failWith);
    world.reader.faults.clear();
    await Promise.all(live.map((op) => op.quiescence));
    await nextTurn();
    if (world.reader.isOpen) world.reader.faults.delayCompletions('forever');
    for (const op of live) {
      const outcome = await op.outcome;
      const quiescence = await op.quiescence;
      // Late success never turns a failure into a success.
      if (outcome.ok && quiescence.late) throw new Error(`operation ${op.id} succeeded late`);
    }
    await check(real);
  }
  toString = () => `release(${this.failWith ?? 'ok'})`;
}

class Advance implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(_model: Model, real: Real): Promise<void> {
    await advance(real, this.ms);
    await check(real);
  }
  toString = () => `advance(${this.ms})`;
}

class Reload implements fc.AsyncCommand<Model, Real> {
  check = (model: Readonly<Model>) => model !== undefined;
  async run(_model: Model, real: Real): Promise<void> {
    const { world } = real;
    if (real.draining !== undefined) return;
    world.book.track(world.source.name, 'incarnation-1', world.reader.loadPeer(world.source.metadata()));
    await check(real);
  }
  toString = () => 'reload-peer';
}

class Drain implements fc.AsyncCommand<Model, Real> {
  constructor(readonly shutdown: boolean) {}
  check = () => true;
  async run(_model: Model, real: Real): Promise<void> {
    if (real.draining !== undefined) return;
    const { controller } = real.world;
    real.draining = this.shutdown ? controller.shutdown({ deadlineMs: 100 }) : controller.drain({ deadlineMs: 50 });
    await nextTurn();
    await check(real);
  }
  toString = () => (this.shutdown ? 'shutdown' : 'drain');
}

const commands = [
  fc.subarray([0, 1, 2, 3], { minLength: 1, maxLength: 2 }).map((banks) => new Post(banks)),
  fc
    .constantFrom<StatusCodeName | undefined>(undefined, undefined, 'REMOTE_DISCONNECT', 'BACKEND')
    .map((code) => new Release(code)),
  fc.integer({ min: 1, max: 150 }).map((ms) => new Advance(ms)),
  fc.constant(new Reload()),
  fc.boolean().map((shutdown) => new Drain(shutdown)),
];

describe('ledger and drain against the loopback native layer', () => {
  it(`keeps bank references, native counters and outcomes consistent over ${RUNS} interleavings`, async () => {
    const before = liveCounters();
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 14 }), async (steps) => {
        const clock = new ManualClock();
        const world = await openLoopbackWorld({
          ranks: 2,
          banksPerRank: 2,
          clock,
          timeouts: TIMEOUTS,
          shutdownDeadlineMs: 400,
        });
        world.reader.faults.delayCompletions('forever');
        const real: Real = { world, clock, ops: [], draining: undefined };
        try {
          await fc.asyncModelRun(() => ({ model: { posted: 0 }, real }), steps);
          let finished = false;
          const shutdown = world.controller.shutdown().finally(() => (finished = true));
          await advance(real, 1000, () => finished);
          const result = await shutdown;
          await real.draining;
          // Loopback confirms every cancel, so nothing is ever left: every bank back, the agent gone.
          expect(result.banksRetained).toEqual([]);
          expect(result.quarantined).toEqual([]);
          expect(world.banks.every((bank) => bank.state === 'returned')).toBe(true);
          expect(world.reader.isOpen).toBe(false);
          await check(real);
        } finally {
          if (world.reader.isOpen) {
            world.reader.faults.clear();
            await world.controller.shutdown();
          }
          await world.closeSource();
        }
        expect(liveCounters()).toEqual(before);
      }),
      { numRuns: RUNS },
    );
  }, 300_000);
});
