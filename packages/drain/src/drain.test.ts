import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { layoutRankBanks, referenceGeometries } from '@kvreuse/descriptors';
import type { PostRequest } from '@kvreuse/native-bindings';
import {
  ClusterSecret,
  type DiscoveryStore,
  MemoryDiscoveryStore,
  openSqliteDiscovery,
  startRankPublication,
  watchWorkerReadiness,
  workerPartsPrefix,
  type WorkerReadiness,
} from '@kvreuse/discovery';
import { InventoryPublisher } from '@kvreuse/inventory';
import { Bank, buildRankPart, kvreuseOwner, registerRank, transportMetadataOf } from '@kvreuse/registry';
import { afterAll, describe, expect, it, type MockInstance, vi } from 'vitest';
import { loopbackWorlds } from '../test/support/loopback-worlds.js';
import { agentName, liveCounters, nextTurn, transport } from '../test/support/loopback-world.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { DrainController, type ReadersOutcome, type ShutdownStepResult, type StepDeadline } from './drain.js';
import { InvalidDrainOptionError } from './errors.js';
import { OperationLedger } from './ledger.js';
import { PeerBook } from './peer-book.js';

const worlds = loopbackWorlds();
const { refusedBank } = worlds;
/** Every world's ledger runs on a manual clock: no deadline fires unless the test advances it. */
const world = (overrides: { clock?: ManualClock } = {}) => worlds.world({ clock: new ManualClock(), ...overrides });

const firstCall = (spy: MockInstance) => Math.min(...spy.mock.invocationCallOrder);
const lastCall = (spy: MockInstance) => Math.max(...spy.mock.invocationCallOrder);
const stepOf = (steps: readonly ShutdownStepResult[], step: ShutdownStepResult['step']) =>
  steps.find((result) => result.step === step);
const NO_READERS: ReadersOutcome = { released: 0, lapsed: 0, outstanding: 0 };
/** A hook's promise that rejects with `message` when its step's signal aborts. */
const rejectedAtAbort = (signal: AbortSignal, message: string) =>
  new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Error(message))));
/** A rank-part withdrawal that passes its rejection at the abort on through an `async` function. */
const withdrawPart = async (signal: AbortSignal): Promise<void> => {
  await rejectedAtAbort(signal, 'the rank part was not withdrawn');
};

describe('DrainController', () => {
  it('reports a bank its owner refuses back as retained, and a failed withdrawal as a failed step', async () => {
    const w = await world();
    const bank = await refusedBank(w);
    const controller = new DrainController({
      ledger: w.ledger,
      shutdownDeadlineMs: 10_000,
      withdrawRankParts: () => Promise.reject(new Error('etcd unavailable')),
    });
    controller.addRank(w.ranks[0]!);
    controller.addRank({ tpRank: 1, ppRank: 0, agent: w.reader, banks: [bank] });
    const result = await controller.shutdown();
    expect(result.report.banksReturned.map((label) => [label.tpRank, label.index])).toEqual([
      [0, 1],
      [0, 0],
    ]);
    expect(result.report.banksRetained).toEqual([
      {
        bank: expect.objectContaining({ tpRank: 1, index: 0 }),
        retainedBy: 'owner-refusal',
        code: 'BANK_OWNER_RELEASE_FAILED',
        reason: expect.stringContaining('its owner refused it back'),
      },
    ]);
    expect(stepOf(result.steps, 'withdraw-rank-parts')).toMatchObject({ outcome: 'failed', error: 'etcd unavailable' });
    expect(stepOf(result.steps, 'hand-back')).toMatchObject({
      outcome: 'failed',
      error: expect.stringContaining('1 owners refused their bank back'),
    });
    expect(stepOf(result.steps, 'destroy-agent')).toMatchObject({ outcome: 'skipped', reason: 'no agent was given' });
    expect(result.retained).toBe(true);
    expect(bank.state).toBe('releasing');
    expect(bank.region).toBeUndefined();
  });

  it('shuts down once: a shutdown() after the first finished resolves to the same result and closes nothing again', async () => {
    const w = await world();
    const close = vi.spyOn(w.reader, 'close');
    const first = await w.controller.shutdown();
    expect(first.agentDestroyed).toBe(true);
    await expect(w.controller.shutdown()).resolves.toBe(first);
    await expect(w.controller.drain({ deadlineMs: 0 })).resolves.toBe(first.report);
    expect(close).toHaveBeenCalledTimes(1);
    // The agent itself may be closed again too: nothing happens.
    await expect(w.reader.close()).resolves.toEqual({ forced: undefined });
  });

  it('refuses options of the wrong shape with a typed error naming the option', async () => {
    const w = await world();
    const refused = (make: () => unknown, option: string) =>
      expect(make).toThrow(expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option }));
    refused(() => new DrainController({ shutdownDeadlineMs: 100 } as never), 'ledger');
    refused(() => new DrainController(undefined as never), 'options');
    refused(() => new DrainController({ ledger: w.ledger } as never), 'transport.shutdownDeadlineMs');
    refused(
      () => new DrainController({ ledger: w.ledger, shutdownDeadlineMs: 100, agent: {} } as never),
      'agent.close',
    );
    refused(
      () => new DrainController({ ledger: w.ledger, shutdownDeadlineMs: 100, withdrawRankParts: 'yes' } as never),
      'withdrawRankParts',
    );
    refused(() => w.controller.drain(undefined as never), 'options');
    refused(() => w.controller.shutdown(null as never), 'options');
    refused(() => w.controller.addRank({ tpRank: 0, ppRank: 0 } as never), 'rank.banks');
    refused(() => w.controller.addRank({ tpRank: -1, ppRank: 0, banks: [] } as never), 'rank.tpRank');
  });

  it("drains the banks a rank held when it was added, whatever the caller's array holds since", async () => {
    const w = await world();
    const controller = new DrainController({ ledger: w.ledger, shutdownDeadlineMs: 10_000 });
    const banks = [w.banks[0]!];
    controller.addRank({ ...w.ranks[0]!, banks });
    banks.push(w.banks[1]!);
    controller.addRank({ ...w.ranks[0]!, banks: [w.banks[1]!] });
    const result = await controller.shutdown();
    expect(result.report.banksReturned.map((label) => [label.tpRank, label.index])).toEqual([
      [0, 1],
      [0, 0],
    ]);
    expect(result.retained).toBe(false);
  });

  it('refuses bad deadlines, hooks that are not functions and ranks added once draining began', async () => {
    const w = await world();
    expect(() => new DrainController({ ledger: w.ledger, shutdownDeadlineMs: -1 })).toThrow(InvalidDrainOptionError);
    expect(() => new DrainController({ ledger: w.ledger, shutdownDeadlineMs: 1, waitForReaders: 5 as never })).toThrow(
      /waitForReaders = 5 is refused: must be a function when given/,
    );
    expect(
      () => new DrainController({ ledger: w.ledger, shutdownDeadlineMs: 1, withdrawInventory: 'yes' as never }),
    ).toThrow(InvalidDrainOptionError);
    expect(() => w.controller.drain({ deadlineMs: Number.NaN })).toThrow(/deadlineMs = NaN is refused/);
    expect(() => w.controller.shutdown({ deadlineMs: 1.5 })).toThrow(/deadlineMs = 1\.5 is refused/);
    // The same rank twice (or a rank sharing a bank with one added): each bank is drained once.
    expect(() => w.controller.addRank(w.ranks[0]!)).toThrow(/holds a bank of a rank already added/);
    await w.controller.drain({ deadlineMs: 0 });
    expect(() => w.controller.addRank(w.ranks[0]!)).toThrow(/cannot be added once draining began/);
  });

  it('still waits for readers, stops intake, drains, deregisters and hands back when both withdrawals fail', async () => {
    const w = await world();
    const waitForReaders = vi.fn(() => Promise.resolve(NO_READERS));
    const controller = new DrainController({
      ledger: w.ledger,
      shutdownDeadlineMs: 1_000,
      withdrawRankParts: () => Promise.reject(new Error('discovery unreachable')),
      withdrawInventory: () => Promise.reject(new Error('inventory key locked')),
      waitForReaders,
    });
    for (const rank of w.ranks) controller.addRank(rank);
    const stopIntake = vi.spyOn(w.ledger, 'stopIntake');
    const deregistrations = w.banks.map((bank) => vi.spyOn(bank.region!, 'deregister'));
    const report = await controller.drain({ deadlineMs: 1_000 });
    expect(waitForReaders).toHaveBeenCalledOnce();
    expect(stopIntake).toHaveBeenCalledOnce();
    for (const spy of deregistrations) expect(spy).toHaveBeenCalledOnce();
    expect(w.banks.map((bank) => bank.state)).toEqual(['returned', 'returned']);
    expect(report.steps.filter((step) => step.outcome === 'failed')).toEqual([
      expect.objectContaining({ step: 'withdraw-rank-parts', error: 'discovery unreachable' }),
      expect.objectContaining({ step: 'withdraw-inventory', error: 'inventory key locked' }),
    ]);
    expect(report).toMatchObject({ readers: NO_READERS, banksRetained: [] });
  });

  it('records each step when it runs, with its start and duration on the ledger clock', async () => {
    const clock = new ManualClock();
    const w = await world({ clock });
    const controller = new DrainController({
      ledger: w.ledger,
      shutdownDeadlineMs: 10_000,
      // Each hook takes time on the manual clock; the steps after it start later by exactly that much.
      withdrawRankParts: async () => clock.advance(7),
      waitForReaders: async () => {
        clock.advance(30);
        return { released: 2, lapsed: 1, outstanding: 0 };
      },
    });
    for (const rank of w.ranks) controller.addRank(rank);
    const report = await controller.drain({ deadlineMs: 1_000 });
    expect(stepOf(report.steps, 'withdraw-rank-parts')).toMatchObject({ startedAt: 0, durationMs: 7, outcome: 'ok' });
    expect(stepOf(report.steps, 'withdraw-inventory')).toMatchObject({
      startedAt: 7,
      durationMs: 0,
      outcome: 'skipped',
      reason: 'no withdrawInventory was given',
    });
    expect(stepOf(report.steps, 'wait-for-readers')).toMatchObject({
      startedAt: 7,
      durationMs: 30,
      outcome: 'ok',
      detail: '2 released, 1 lapsed',
    });
    expect(stepOf(report.steps, 'stop-intake')).toMatchObject({ startedAt: 37, outcome: 'ok' });
    expect(report.readers).toEqual({ released: 2, lapsed: 1, outstanding: 0 });
  });

  it.each([
    {
      hooks: 'never settle',
      withdrawRankParts: () => new Promise(() => undefined),
      waitForReaders: () => new Promise<never>(() => undefined),
      withdrawalError: 'the deadline passed first',
      readersError: 'the deadline passed first',
    },
    {
      hooks: 'reject at their abort through async functions, with their own errors',
      withdrawRankParts: async ({ signal }: StepDeadline) => {
        await withdrawPart(signal);
      },
      waitForReaders: async ({ signal }: StepDeadline) => rejectedAtAbort(signal, '2 pins were still held'),
      withdrawalError: 'the rank part was not withdrawn',
      readersError: '2 pins were still held',
    },
  ])(
    'gives a withdrawal a quarter of the time, readers half of the rest, aborts their wait then and goes on: hooks that $hooks',
    async ({ withdrawRankParts, waitForReaders, withdrawalError, readersError }) => {
      const clock = new ManualClock();
      const w = await world({ clock });
      let wait: StepDeadline | undefined;
      const controller = new DrainController({
        ledger: w.ledger,
        shutdownDeadlineMs: 10_000,
        withdrawRankParts,
        waitForReaders: (given) => {
          wait = given;
          return waitForReaders(given);
        },
      });
      for (const rank of w.ranks) controller.addRank(rank);
      const draining = controller.drain({ deadlineMs: 1_000 });
      clock.advance(250);
      await nextTurn();
      expect(wait).toMatchObject({ deadlineAt: 625, timeoutMs: 375 });
      expect(wait!.signal.aborted).toBe(false);
      expect(w.ledger.intakeStopped).toBe(false);
      clock.advance(375);
      const report = await draining;
      expect(wait!.signal.aborted).toBe(true);
      expect(stepOf(report.steps, 'withdraw-rank-parts')).toMatchObject({
        startedAt: 0,
        durationMs: 250,
        outcome: 'failed',
        error: withdrawalError,
      });
      expect(stepOf(report.steps, 'wait-for-readers')).toMatchObject({
        startedAt: 250,
        durationMs: 375,
        outcome: 'failed',
        error: readersError,
      });
      expect(stepOf(report.steps, 'stop-intake')).toMatchObject({ startedAt: 625, outcome: 'ok' });
      expect(report).toMatchObject({ readers: undefined, banksRetained: [] });
      expect(w.banks.map((bank) => bank.state)).toEqual(['returned', 'returned']);
    },
  );

  it("gives the withdrawals their step's deadline; one that rejects as its signal aborts is reported with its own error", async () => {
    const clock = new ManualClock();
    const w = await world({ clock });
    const given: { deadlineAt: number; timeoutMs: number; signal: AbortSignal }[] = [];
    const controller = new DrainController({
      ledger: w.ledger,
      shutdownDeadlineMs: 10_000,
      withdrawRankParts: (deadline) => {
        given.push(deadline);
        return new Promise((_, reject) =>
          deadline.signal.addEventListener('abort', () => reject(new Error('the rank part was not withdrawn'))),
        );
      },
      withdrawInventory: (deadline) => {
        given.push(deadline);
        return new Promise(() => undefined);
      },
    });
    for (const rank of w.ranks) controller.addRank(rank);
    const draining = controller.drain({ deadlineMs: 1_000 });
    expect(given).toMatchObject([{ deadlineAt: 250, timeoutMs: 250, signal: { aborted: false } }]);
    clock.advance(250);
    await nextTurn();
    expect(given).toMatchObject([
      { signal: { aborted: true } },
      { deadlineAt: 250, timeoutMs: 0, signal: { aborted: false } },
    ]);
    clock.advance(0);
    const report = await draining;
    expect(stepOf(report.steps, 'withdraw-rank-parts')).toMatchObject({
      outcome: 'failed',
      error: 'the rank part was not withdrawn',
    });
    expect(stepOf(report.steps, 'withdraw-inventory')).toMatchObject({
      outcome: 'failed',
      error: 'the deadline passed first',
    });
  });

  it('reports pins still held, a throwing hook and a malformed outcome as failed waits, and goes on', async () => {
    const outcomes: (() => Promise<ReadersOutcome>)[] = [
      () => Promise.resolve({ released: 3, lapsed: 0, outstanding: 2 }),
      () => Promise.reject(new Error('pin table unreadable')),
      () => Promise.resolve({ released: -1 } as never),
    ];
    const errors: string[] = [];
    for (const outcome of outcomes) {
      const w = await world();
      const controller = new DrainController({ ledger: w.ledger, shutdownDeadlineMs: 1_000, waitForReaders: outcome });
      for (const rank of w.ranks) controller.addRank(rank);
      const report = await controller.drain({ deadlineMs: 1_000 });
      const step = stepOf(report.steps, 'wait-for-readers');
      errors.push(step?.outcome === 'failed' ? step.error : `not failed: ${JSON.stringify(step)}`);
      expect(report.banksReturned).toHaveLength(2);
    }
    expect(errors).toEqual([
      '2 pins still held at the deadline (3 released, 0 lapsed)',
      'pin table unreadable',
      'waitForReaders resolved with {"released":-1}, not { released, lapsed, outstanding } counts',
    ]);
  });

  it('records the shutdown steps after an earlier drain() once, in the order they ran', async () => {
    const w = await world();
    const report = await w.controller.drain({ deadlineMs: 10_000 });
    const invalidateAll = vi.spyOn(w.book, 'invalidateAll');
    const result = await w.controller.shutdown();
    expect(result.report).toBe(report);
    expect(result.steps.slice(0, report.steps.length)).toEqual(report.steps);
    expect(invalidateAll).toHaveBeenCalledOnce();
    expect(result.steps.slice(report.steps.length).map((step) => [step.step, step.outcome])).toEqual([
      ['invalidate-peers', 'ok'],
      ['destroy-agent', 'ok'],
    ]);
  });
});

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-drain-order-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const stores: [string, () => DiscoveryStore][] = [
  ['memory', () => new MemoryDiscoveryStore()],
  ['sqlite', () => openSqliteDiscovery(join(dir, `${agentName('order')}.db`))],
];

/** The source worker: one rank of real loopback memory, registered, published, with inventory. */
async function sourceWorker(store: DiscoveryStore) {
  const geometry = referenceGeometries['qwen3-0.6b'];
  const identity = {
    workerId: agentName('decode'),
    incarnation: 'inc-1',
    role: 'decode',
    geometry,
    tpSize: 1,
    ppSize: 1,
    dpRank: 0,
  } as const;
  const agent = await transport.createAgent({ name: agentName('source'), backend: 'loopback' });
  const layout = layoutRankBanks(geometry, { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 }, { address: 0n, blocks: 1 });
  const banks = await Promise.all(
    layout.map(async (spec, index) => {
      const allocation = await agent.allocate(spec.bytes);
      return Bank.adopt(
        { ...spec, tpRank: 0, ppRank: 0, index, address: allocation.address },
        kvreuseOwner(allocation),
      );
    }),
  );
  const rank = await registerRank({ agent, banks });
  const publication = await startRankPublication(
    store,
    [
      buildRankPart(
        identity,
        rank,
        transportMetadataOf(agent, ClusterSecret.ofThisProcess(), { ...identity, ...rank }),
      ),
    ],
    { leaseTtlMs: 60_000 },
  );
  // Its own lease, so that revoking the parts' lease does not take the inventory with it and both withdrawals act.
  const inventoryLease = await store.grantLease(60_000);
  const inventory = new InventoryPublisher(store, {
    workerId: identity.workerId,
    incarnation: identity.incarnation,
    epoch: publication.epoch,
    lease: inventoryLease.id,
  });
  await inventory.publish([{ type: 'stored', tier: 'gpu', blocks: [1n, 2n, 3n], expiresAt: Date.now() + 600_000 }]);
  // A manual clock: the drain's deadlines never fire, so the readers' wait ends only when the reader saw the worker go.
  const ledger = new OperationLedger<PostRequest>({
    agent,
    peers: new PeerBook(),
    timeouts: { operationTimeoutMs: 1_000, abandonTimeoutMs: 5_000 },
    clock: new ManualClock(),
  });

  return { identity, agent, banks, rank, publication, inventoryLease, inventory, ledger };
}

/**
 * A reader that follows the worker's readiness and its inventory key, noting with each readiness it sees how
 * many banks were deregistered and whether intake had stopped; `gone` settles once it saw the worker go.
 */
async function followWorker(
  store: DiscoveryStore,
  { identity, banks, inventory, ledger }: Awaited<ReturnType<typeof sourceWorker>>,
) {
  const deregistrations = banks.map((bank) => vi.spyOn(bank.region!, 'deregister'));
  const deregistered = () => deregistrations.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
  const observed: { readiness: WorkerReadiness; deregistered: number; intakeStopped: boolean }[] = [];
  let sawNotReady!: () => void;
  const notReady = new Promise<void>((resolve) => (sawNotReady = resolve));
  const readiness = await watchWorkerReadiness(store, identity.workerId, {
    onChange: (seen) => {
      observed.push({ readiness: seen, deregistered: deregistered(), intakeStopped: ledger.intakeStopped });
      if (!seen.ready && observed.length > 1) sawNotReady();
    },
  });
  let sawInventoryGone!: () => void;
  const inventoryGone = new Promise<void>((resolve) => (sawInventoryGone = resolve));
  const inventoryWatch = await store.watch(inventory.key, (notice) => {
    if (notice.type === 'changes' && notice.events.some((event) => event.type === 'delete')) sawInventoryGone();
  });
  return { deregistrations, observed, gone: Promise.all([notReady, inventoryGone]), readiness, inventoryWatch };
}

describe.each(stores)('shutdown order, source side first, on %s discovery and a loopback agent', (_, open) => {
  it('withdraws the parts and the inventory, then waits for readers (who saw it not ready), before intake stops and any bank is deregistered', async () => {
    const store = open();
    const worker = await sourceWorker(store);
    const { identity, agent, banks, rank, publication, inventoryLease, inventory, ledger } = worker;
    // A reader follows the worker's readiness and its inventory key.
    const { deregistrations, observed, gone, readiness, inventoryWatch } = await followWorker(store, worker);
    expect(observed.map(({ readiness: seen }) => seen.ready)).toEqual([true]);

    // Spies on the real objects the shutdown acts on.
    const commit = vi.spyOn(store, 'commit');
    const stopIntake = vi.spyOn(ledger, 'stopIntake');
    const settle = vi.spyOn(ledger, 'settle');
    const invalidateAll = vi.spyOn(ledger.peers, 'invalidateAll');
    const handBack = banks.map((bank) => vi.spyOn(bank, 'completeRelease'));
    const closeAgent = vi.spyOn(agent, 'close');
    // The endpoint's hook: here, it returns once the reader has seen the worker go (pins would be waited for here).
    const waitForReaders = vi.fn(async () => {
      await gone;
      return NO_READERS;
    });
    const controller = new DrainController({
      ledger,
      shutdownDeadlineMs: 60_000,
      agent,
      withdrawRankParts: () => publication.withdraw(),
      withdrawInventory: () => inventory.withdraw(),
      waitForReaders,
    });
    controller.addRank(rank);
    const result = await controller.shutdown();

    // The reader saw the worker not ready while every bank was still registered and intake still open.
    expect(observed.slice(1)).toEqual([
      {
        readiness: expect.objectContaining({ ready: false, reasons: [expect.objectContaining({ kind: 'no-parts' })] }),
        deregistered: 0,
        intakeStopped: false,
      },
    ]);
    const withdrawal = commit.mock.calls.findIndex(([operations]) =>
      operations.every((operation) => operation.type === 'delete'),
    );
    expect(withdrawal).toBeGreaterThanOrEqual(0);
    const withdrawalCommit = commit.mock.invocationCallOrder[withdrawal]!;
    // The inventory batch is deleted by a conditional commit (only if it is still this incarnation's).
    const inventoryDelete = commit.mock.calls.findIndex(([operations]) =>
      operations.some((operation) => operation.type === 'delete' && operation.key === inventory.key),
    );
    expect(inventoryDelete).toBeGreaterThanOrEqual(0);
    // The calls happened in this order: withdrawal commit < inventory delete < readers < intake < drain < peers < deregistrations < hand-backs < agent.
    const order = [
      withdrawalCommit,
      commit.mock.invocationCallOrder[inventoryDelete]!,
      firstCall(waitForReaders),
      firstCall(stopIntake),
      firstCall(settle),
      firstCall(invalidateAll),
      ...deregistrations.map(firstCall).sort((a, b) => a - b),
      ...handBack.map(firstCall).sort((a, b) => a - b),
      firstCall(closeAgent),
    ];
    expect(order).toEqual([...order].sort((a, b) => a - b));
    expect(Math.max(...deregistrations.map(lastCall))).toBeLessThan(Math.min(...handBack.map(firstCall)));
    expect(result).toMatchObject({ retained: false, agentDestroyed: true });
    expect(result.steps.every((step) => step.outcome === 'ok')).toBe(true);
    expect(await store.list(workerPartsPrefix(identity.workerId))).toMatchObject({ entries: [] });
    expect(await store.get(inventory.key)).toBeUndefined();

    await store.revokeLease(inventoryLease.id);
    await inventoryWatch.close();
    await readiness.close();
    await store.close();
    expect(liveCounters()).toMatchObject({ liveAgents: 0, liveRegistrations: 0, liveAllocations: 0 });
  });
});
