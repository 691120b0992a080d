import { describe, expect, it } from 'vitest';
import { agentName, testedBackends, transport } from '../test/support/backends.js';
import { allZero, liveCounters } from '../test/support/pair.js';
import { settledYet } from '../test/support/settled.js';
import { HandleClosedError } from './errors.js';

const PAGE = 4096;

describe.each(testedBackends)('memory jobs on %s', (backend) => {
  it('closes a region and an allocation at once and resolves once the agent thread unmapped them', async () => {
    const agent = await transport.createAgent({ name: agentName('jobs'), backend });
    const bank = await agent.allocate(16 * PAGE);
    const region = agent.register(bank);
    agent.metadata(); // exported: deregistering it fences readers (UCX) on the agent's thread
    agent.faults.stallProgress(true);
    const deregistered = region.deregister();
    expect(region.isOpen).toBe(false);
    expect(agent.counters()).toMatchObject({ liveRegistrations: 0, registeredBytes: 0 });
    await expect(region.deregister()).rejects.toThrow(HandleClosedError);
    const freed = bank.free();
    expect(bank.isOpen).toBe(false);
    expect(agent.counters()).toMatchObject({ liveAllocations: 0, allocatedBytes: 0 });
    expect([await settledYet(deregistered), await settledYet(freed)]).toEqual([false, false]);
    agent.faults.stallProgress(false);
    await expect(deregistered).resolves.toBeUndefined();
    await expect(freed).resolves.toBeUndefined();
    await agent.close();
    expect(liveCounters()).toEqual(allZero);
  });

  it('lets the agent close while a deregistration and a free wait, and settles them with the close', async () => {
    const agent = await transport.createAgent({ name: agentName('job-close'), backend });
    const bank = await agent.allocate(16 * PAGE);
    const region = agent.register(bank);
    agent.faults.stallProgress(true);
    const deregistered = region.deregister();
    const freed = bank.free();
    expect(await settledYet(freed)).toBe(false);
    await expect(agent.close()).resolves.toEqual({ forced: undefined });
    await expect(Promise.all([deregistered, freed])).resolves.toEqual([undefined, undefined]);
    expect(liveCounters()).toEqual(allZero);
  });
});
