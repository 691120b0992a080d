import { Bank, frameworkOwner, registerRank } from '@kvreuse/registry';
import { afterEach, describe, expect, it } from 'vitest';
import { liveCounters, type LoopbackWorld, openLoopbackWorld } from '../test/support/loopback-world.js';
import { DrainController } from './drain.js';
import { InvalidDrainOptionError } from './errors.js';
import { shutdownOnSignals, type SignalTarget } from './signals.js';

const zero = { liveAgents: 0, liveRegistrations: 0, liveAllocations: 0, livePeers: 0, liveOperations: 0, inflightOperations: 0 };
let open: LoopbackWorld[] = [];
const cleanups: (() => void)[] = [];

async function world(): Promise<LoopbackWorld> {
  const created = await openLoopbackWorld({ ranks: 1, banksPerRank: 2 });
  open.push(created);
  return created;
}

afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) cleanup();
  for (const created of open) {
    await created.controller.shutdown({ deadlineMs: 0 });
    if (created.reader.isOpen) created.reader.close();
    created.closeSource();
  }
  open = [];
  expect(liveCounters()).toEqual(zero);
});

/** A framework-owned bank in kvreuse-allocated memory whose owner refuses it back, registered as rank 1. */
async function refusedBank(w: LoopbackWorld): Promise<Bank> {
  const memory = w.reader.allocate(1 << 16);
  const bank = Bank.adopt(
    { tpRank: 1, ppRank: 0, index: 0, memKind: 'dram', deviceId: 0, address: memory.address, bytes: 1n << 16n, blocks: 1, blockStride: 1n << 16n },
    frameworkOwner('engine-block-pool', () => Promise.reject(new Error('framework busy'))),
  );
  w.controller.addRank(await registerRank({ agent: w.reader, banks: [bank] }));
  cleanups.push(() => memory.free());
  return bank;
}

function fakeProcess() {
  const handlers = new Map<string, () => void>();
  const exits: number[] = [];
  const target: SignalTarget = {
    on: (signal, listener) => handlers.set(signal, listener),
    off: (signal) => handlers.delete(signal),
    exit: (code) => void exits.push(code ?? 0),
  };
  return { handlers, exits, target };
}

const settled = (promise: Promise<unknown>) => promise.then(() => new Promise((resolve) => setImmediate(resolve)));

describe('DrainController', () => {
  it('reports a bank its owner refuses back as retained, and a failed withdrawal as a failed step', async () => {
    const w = await world();
    const bank = await refusedBank(w);
    const controller = new DrainController({
      ledger: w.ledger,
      shutdownDeadlineMs: 100,
      withdrawRankParts: () => Promise.reject(new Error('etcd unavailable')),
    });
    controller.addRank(w.ranks[0]!);
    controller.addRank({ tpRank: 1, ppRank: 0, agent: w.reader, banks: [bank] });
    const result = await controller.shutdown();
    expect(result.report.banksReturned.map((label) => [label.tpRank, label.index])).toEqual([[0, 1], [0, 0]]);
    expect(result.report.banksRetained).toEqual([
      { bank: expect.objectContaining({ tpRank: 1, index: 0 }), reason: expect.stringContaining('its owner refused it back') },
    ]);
    expect(result.steps.find((step) => step.step === 'withdraw-rank-parts')).toMatchObject({ ok: false, detail: expect.stringContaining('etcd unavailable') });
    expect(result.steps.find((step) => step.step === 'destroy-agent')).toEqual({ step: 'destroy-agent', ok: true, detail: 'no agent' });
    expect(result.retained).toBe(true);
    expect(bank.state).toBe('releasing');
    expect(bank.region).toBeUndefined();
  });

  it('refuses bad deadlines and ranks added once draining began', async () => {
    const w = await world();
    expect(() => new DrainController({ ledger: w.ledger, shutdownDeadlineMs: -1 })).toThrow(InvalidDrainOptionError);
    expect(() => w.controller.drain({ deadlineMs: Number.NaN })).toThrow(/deadlineMs = null is refused/);
    expect(() => w.controller.shutdown({ deadlineMs: 1.5 })).toThrow(/deadlineMs = 1\.5 is refused/);
    await w.controller.drain({ deadlineMs: 0 });
    expect(() => w.controller.addRank(w.ranks[0]!)).toThrow(/cannot be added once draining began/);
  });
});

describe('shutdownOnSignals', () => {
  it('runs one shutdown for any number of signals, exits with 0 when nothing was retained, and can be removed', async () => {
    const w = await world();
    const { handlers, exits, target } = fakeProcess();
    let results = 0;
    const dispose = shutdownOnSignals(w.controller, { target, onResult: () => (results += 1) });
    expect([...handlers.keys()]).toEqual(['SIGTERM', 'SIGINT']);
    handlers.get('SIGTERM')!();
    handlers.get('SIGINT')!();
    await settled(w.controller.shutdown());
    expect(exits).toEqual([0, 0]);
    expect(results).toBe(2);
    expect(w.reader.isOpen).toBe(false);
    dispose();
    expect(handlers.size).toBe(0);
  });

  it('exits with 1 when something was retained', async () => {
    const w = await world();
    await refusedBank(w);
    const { handlers, exits, target } = fakeProcess();
    shutdownOnSignals(w.controller, { target, signals: ['SIGTERM'] });
    handlers.get('SIGTERM')!();
    await settled(w.controller.shutdown());
    expect(exits).toEqual([1]);
  });
});
