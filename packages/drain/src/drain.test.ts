import { describe, expect, it } from 'vitest';
import { loopbackWorlds } from '../test/support/loopback-worlds.js';
import { DrainController } from './drain.js';
import { InvalidDrainOptionError } from './errors.js';

const { world, refusedBank } = loopbackWorlds();

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
