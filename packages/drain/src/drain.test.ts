import { describe, expect, it } from 'vitest';
import { fakeRequest, flush, openFakeWorld, PEER, TIMEOUTS } from '../test/support/fake-world.js';
import { InvalidDrainOptionError } from './errors.js';
import { DrainController } from './drain.js';
import { shutdownOnSignals } from './signals.js';

describe('DrainController', () => {
  it('reports a quarantined operation and retains its bank; later quiescence hands it back and destroys the agent', async () => {
    const world = await openFakeWorld(2, 1);
    const [first, second] = world.banks;
    const operation = world.ledger.post(fakeRequest(world, [second!]), { ticket: world.book.ticket(PEER), banks: [second!] });
    const released: number[] = [];
    let destroyed = false;
    world.controller.on('released', (_operation, banks) => released.push(...banks.map((bank) => bank.tpRank)));
    world.controller.on('agent-destroyed', () => (destroyed = true));
    const shutdown = world.controller.shutdown();
    world.clock.advance(400);
    const result = await shutdown;
    expect(result.report.quarantined).toEqual([expect.objectContaining({ id: operation.id, reason: expect.stringContaining('transport.abandonTimeoutMs') })]);
    expect(result.report.banksReturned.map((bank) => bank.tpRank)).toEqual([0]);
    expect(result.report.banksRetained).toEqual([{ bank: expect.objectContaining({ tpRank: 1 }), reason: expect.stringContaining('quarantined') }]);
    expect(result).toMatchObject({ retained: true, agentDestroyed: false });
    expect(result.steps.find((step) => step.step === 'destroy-agent')).toEqual({
      step: 'destroy-agent',
      ok: false,
      detail: 'kept: 1 quarantined operations are not terminal',
    });
    expect(first!.state).toBe('returned');
    expect(second!.state).toBe('retained');
    expect(world.handedBack.get(second!)).toBeUndefined();

    world.native.operations[0]!.fail('CANCELED');
    await flush();
    expect(released).toEqual([1]);
    expect(second!.state).toBe('returned');
    expect(world.handedBack.get(second!)).toBe(1);
    expect(destroyed).toBe(true);
    expect(world.native.closed).toBe(true);
    expect(world.native.violations).toEqual([]);
  });

  it('reports a bank whose owner refuses it back as retained, and a withdrawal that fails as a failed step', async () => {
    const world = await openFakeWorld(1, 1);
    const controller = new DrainController({
      ledger: world.ledger,
      shutdownDeadlineMs: 100,
      withdrawRankParts: () => Promise.reject(new Error('etcd unavailable')),
    });
    // A second controller over the same ranks, whose owner callback fails: the bank stays releasing.
    const failing = world.banks[0]!;
    Object.defineProperty(failing.owner, 'release', { value: () => Promise.reject(new Error('framework busy')) });
    controller.addRank(world.ranks[0]!);
    const result = await controller.shutdown();
    expect(result.report.banksRetained).toEqual([{ bank: expect.objectContaining({ index: 0 }), reason: expect.stringContaining('its owner refused it back') }]);
    expect(result.steps.find((step) => step.step === 'withdraw-rank-parts')).toMatchObject({ ok: false, detail: expect.stringContaining('etcd unavailable') });
    expect(result.steps.find((step) => step.step === 'destroy-agent')).toMatchObject({ ok: true, detail: 'no agent' });
    expect(result.retained).toBe(true);
    expect(failing.state).toBe('releasing');
  });

  it('refuses bad deadlines and ranks added after draining began', async () => {
    const world = await openFakeWorld(1, 1);
    expect(() => new DrainController({ ledger: world.ledger, shutdownDeadlineMs: -1 })).toThrow(InvalidDrainOptionError);
    expect(() => world.controller.drain({ deadlineMs: Number.NaN })).toThrow(/deadlineMs = null is refused|deadlineMs = NaN/);
    await world.controller.drain({ deadlineMs: 0 });
    expect(() => world.controller.addRank(world.ranks[0]!)).toThrow(/cannot be added once draining began/);
  });
});

describe('shutdownOnSignals', () => {
  it('runs one shutdown for any number of signals, exits with 0 when nothing was retained, and can be removed', async () => {
    const world = await openFakeWorld(1, 1);
    const handlers = new Map<string, () => void>();
    const exits: number[] = [];
    const target = {
      on: (signal: string, listener: () => void) => handlers.set(signal, listener),
      off: (signal: string) => handlers.delete(signal),
      exit: (code?: number) => void exits.push(code ?? 0),
    };
    let results = 0;
    const dispose = shutdownOnSignals(world.controller, { target, onResult: () => (results += 1) });
    expect([...handlers.keys()]).toEqual(['SIGTERM', 'SIGINT']);
    handlers.get('SIGTERM')!();
    handlers.get('SIGINT')!();
    await flush();
    expect(exits).toEqual([0, 0]);
    expect(results).toBe(2);
    expect(world.native.closed).toBe(true);
    dispose();
    expect(handlers.size).toBe(0);
  });

  it('exits with 1 when something was retained', async () => {
    const world = await openFakeWorld(1, 1);
    world.ledger.post(fakeRequest(world, [world.banks[0]!]), { ticket: world.book.ticket(PEER), banks: [world.banks[0]!] });
    const exits: number[] = [];
    let listener: (() => void) | undefined;
    shutdownOnSignals(world.controller, { target: { on: (_s, l) => (listener = l), off: () => {}, exit: (code) => void exits.push(code ?? 0) }, signals: ['SIGTERM'] });
    listener!();
    world.clock.advance(TIMEOUTS.abandonTimeoutMs + 400);
    await flush();
    expect(exits).toEqual([1]);
  });
});
