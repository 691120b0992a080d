import type { Allocation } from '@kvreuse/native-bindings';
import { afterAll, describe, expect, it } from 'vitest';
import { frameworkBanks, kvreuseBanks, PAGE } from '../../test/helpers/rank-memory.js';
import {
  closeAgent,
  closeOpenAgents,
  holdReadInto,
  newAgent,
  rank,
  shape,
  snapshot,
} from '../../test/helpers/registration.js';
import { Bank } from '../banks/bank.js';
import { frameworkOwner } from '../banks/owner.js';
import { BankAlreadyReleasedError, BankInUseError, RankReleaseError } from '../errors.js';
import { deregisterBanks, registerRank, releaseBanks, releaseRank, returnBanks } from './register-rank.js';

afterAll(closeOpenAgents);

describe('releaseRank', () => {
  it('deregisters in reverse order and hands every bank back to its owner, kvreuse memory freed', async () => {
    const agent = await newAgent();
    const before = snapshot(agent, []);
    const { banks, allocations } = await kvreuseBanks(agent, rank, 3, shape);
    const registered = await registerRank({ agent, banks });
    await releaseRank(registered);
    expect(banks.map((bank) => bank.state)).toEqual(['returned', 'returned', 'returned']);
    expect(allocations.map((allocation: Allocation) => allocation.isOpen)).toEqual([false, false, false]);
    expect(snapshot(agent, [])).toEqual(before);
    await closeAgent(agent);
  });

  it('refuses, changing nothing, while a bank is referenced', async () => {
    const agent = await newAgent();
    const { banks, returned } = frameworkBanks(rank, 2, shape);
    const registered = await registerRank({ agent, banks });
    const reference = banks[1]!.acquire();
    await expect(releaseRank(registered)).rejects.toThrow(BankInUseError);
    expect(banks.map((bank) => bank.state)).toEqual(['registered', 'registered']);
    reference.release();
    await releaseRank(registered);
    expect(returned).toEqual([1, 0]);
    await closeAgent(agent);
  });

  it('keeps a bank releasing when its owner refuses it back, hands the others back, and lets the caller retry', async () => {
    const agent = await newAgent();
    const { banks } = frameworkBanks(rank, 2, shape);
    let refusals = 1;
    const returned: number[] = [];
    const picky = banks.map((bank) =>
      Bank.adopt(
        bank,
        frameworkOwner(`engine pool ${bank.index}`, () => {
          if (bank.index === 1 && refusals-- > 0) throw new Error('engine is compacting its pool');
          returned.push(bank.index);
        }),
      ),
    );
    const registered = await registerRank({ agent, banks: picky });
    const error = (await releaseRank(registered).catch((e: unknown) => e)) as RankReleaseError;
    expect(error).toBeInstanceOf(RankReleaseError);
    expect(error.unreturned).toMatchObject([{ bank: { index: 1 }, code: 'BANK_OWNER_RELEASE_FAILED' }]);
    expect(error.message).toMatch(
      /bank 1 deregistered but not handed back .*engine is compacting its pool.*still releasing/,
    );
    expect(picky.map((bank) => bank.state)).toEqual(['returned', 'releasing']);
    expect(agent.counters().liveRegistrations).toBe(0);
    await picky[1]!.completeRelease();
    expect(returned).toEqual([0, 1]);
    await closeAgent(agent);
  });

  it('deregisters a bank two callers release at once only once', async () => {
    const agent = await newAgent();
    const { banks, returned } = frameworkBanks(rank, 1, shape);
    await registerRank({ agent, banks });
    const bank = banks[0]!;
    const [first, second] = await Promise.all([releaseBanks([bank]), releaseBanks([bank])]);
    expect([first.returned, first.retained, second.retained]).toEqual([[bank.label()], [], []]);
    expect([bank.state, bank.region, returned]).toEqual(['returned', undefined, [0]]);
    expect(agent.counters()).toMatchObject({ liveRegistrations: 0, errors: { NOT_FOUND: 0 } });
    await closeAgent(agent);
  });

  it('retains a bank the native layer refuses to deregister and still hands the others back', async () => {
    const agent = await newAgent();
    const { banks, returned } = frameworkBanks(rank, 3, shape);
    const registered = await registerRank({ agent, banks });
    const source = await newAgent();
    const held = holdReadInto(agent, banks[1]!.region!, source, await source.allocate(PAGE));
    const error = await releaseRank(registered).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RankReleaseError);
    expect((error as RankReleaseError).retained).toMatchObject([{ bank: { index: 1 }, code: 'BUSY' }]);
    expect(banks.map((bank) => bank.state)).toEqual(['returned', 'retained', 'returned']);
    expect(returned).toEqual([2, 0]);
    await held.finish();
    banks[1]!.beginRelease();
    await banks[1]!.region!.deregister();
    banks[1]!.markDeregistered();
    await banks[1]!.completeRelease();
    expect(returned).toEqual([2, 0, 1]);
    await closeAgent(agent);
  });
});

describe('releaseBanks', () => {
  it('deregisters every bank before handing any back, skips returned banks and leaves referenced ones untouched', async () => {
    const agent = await newAgent();
    const events: string[] = [];
    const { banks } = frameworkBanks(rank, 4, shape);
    const tracked = banks.map((bank) =>
      Bank.adopt(
        bank,
        frameworkOwner(`pool ${bank.index}`, () => void events.push(`return ${bank.index}`)),
      ),
    );
    const registered = await registerRank({ agent, banks: tracked });
    for (const bank of tracked) {
      const region = bank.region!;
      const deregister = region.deregister.bind(region);
      Object.defineProperty(region, 'deregister', {
        value: async () => {
          await deregister();
          events.push(`deregister ${bank.index}`);
        },
      });
    }
    const reference = tracked[2]!.acquire();
    const first = await releaseBanks([tracked[0]!]);
    expect(first).toMatchObject({ returned: [tracked[0]!.label()], referenced: [], retained: [], unreturned: [] });
    events.length = 0;
    const result = await releaseBanks([...registered.banks].reverse());
    expect(result.returned.map((bank) => bank.index)).toEqual([3, 1]);
    expect(result.referenced).toEqual([tracked[2]]);
    expect(events).toEqual(['deregister 3', 'deregister 1', 'return 3', 'return 1']);
    expect(tracked.map((bank) => bank.state)).toEqual(['returned', 'returned', 'registered', 'returned']);
    reference.release();
    expect((await releaseBanks(tracked)).returned.map((bank) => bank.index)).toEqual([2]);
    expect(agent.counters().liveRegistrations).toBe(0);
    await closeAgent(agent);
  });

  it('splits into deregisterBanks (no owner is called) and returnBanks (hands back only what was deregistered)', async () => {
    const agent = await newAgent();
    const { banks, returned } = frameworkBanks(rank, 3, shape);
    await registerRank({ agent, banks });
    const referencedRegion = banks[1]!.region;
    expect(referencedRegion).toBeDefined();
    const reference = banks[1]!.acquire();
    const deregistration = await deregisterBanks([...banks].reverse());
    // Compared by identity: a deep comparison walks every byte of the framework's pool Buffer.
    const { deregistered, referenced, retained } = deregistration;
    expect([
      deregistered.length,
      deregistered[0] === banks[2],
      deregistered[1] === banks[0],
      referenced.length,
      referenced[0] === banks[1],
      retained,
    ]).toEqual([2, true, true, 1, true, []]);
    expect(agent.counters().liveRegistrations).toBe(1);
    expect(banks.map((bank) => [bank.state, bank.region])).toEqual([
      ['releasing', undefined],
      ['registered', referencedRegion],
      ['releasing', undefined],
    ]);
    expect(returned).toEqual([]);
    const handedBack = await returnBanks(deregistration.deregistered);
    expect(handedBack).toEqual({ returned: [banks[2]!.label(), banks[0]!.label()], unreturned: [] });
    expect(returned).toEqual([2, 0]);
    reference.release();
    await releaseBanks([banks[1]!]);
    await closeAgent(agent);
  });

  it('releases a bank given twice once, and reports it returned once, whoever owns it', async () => {
    const agent = await newAgent();
    const framework = frameworkBanks(rank, 1, shape);
    const { banks: ours } = await kvreuseBanks(agent, { tpRank: rank.tpRank + 1, ppRank: rank.ppRank }, 1, shape);
    const theirs = framework.banks[0]!;
    await registerRank({ agent, banks: [theirs] });
    await registerRank({ agent, banks: ours });
    const released = await releaseBanks([theirs, ours[0]!, theirs, ours[0]!]);
    expect(released).toEqual({
      returned: [theirs.label(), ours[0]!.label()],
      referenced: [],
      retained: [],
      unreturned: [],
    });
    expect([theirs.state, ours[0]!.state]).toEqual(['returned', 'returned']);
    expect(framework.returned).toEqual([0]);
    await closeAgent(agent);
  });

  it('releaseRank refuses, changing nothing, a rank with a bank already released', async () => {
    const agent = await newAgent();
    const { banks, returned } = frameworkBanks(rank, 2, shape);
    const registered = await registerRank({ agent, banks });
    await releaseBanks([banks[1]!]);
    await expect(releaseRank(registered)).rejects.toThrow(BankAlreadyReleasedError);
    expect(banks.map((bank) => bank.state)).toEqual(['registered', 'returned']);
    await releaseBanks([banks[0]!]);
    expect(returned).toEqual([1, 0]);
    await closeAgent(agent);
  });
});

describe('deregisterBanks with kvreuse-owned banks', () => {
  it('begins each free as soon as its agent accepted the deregistration, and reports it returned only once freed', async () => {
    const agent = await newAgent();
    const before = snapshot(agent, []);
    const { banks, allocations } = await kvreuseBanks(agent, rank, 2, shape);
    await registerRank({ agent, banks });
    const deregistering = deregisterBanks([...banks].reverse());
    // Before anything was awaited: every free is begun (the allocation closed), none reported.
    expect(allocations.map((allocation) => allocation.isOpen)).toEqual([false, false]);
    expect(banks.map((bank) => [bank.state, bank.region])).toEqual([
      ['releasing', undefined],
      ['releasing', undefined],
    ]);
    const { deregistered, retained } = await deregistering;
    expect([deregistered.length, retained]).toEqual([2, []]);
    const handedBack = await returnBanks(deregistered);
    expect(handedBack).toEqual({ returned: [banks[1]!.label(), banks[0]!.label()], unreturned: [] });
    expect(banks.map((bank) => bank.state)).toEqual(['returned', 'returned']);
    expect(snapshot(agent, [])).toEqual(before);
    await closeAgent(agent);
  });

  it('frees nothing early for a bank whose deregistration was refused, nor for memory of another agent', async () => {
    const agent = await newAgent();
    const allocator = await newAgent();
    const { banks, allocations } = await kvreuseBanks(agent, rank, 2, shape);
    const foreign = await kvreuseBanks(allocator, { tpRank: 3, ppRank: 0 }, 1, shape);
    await registerRank({ agent, banks });
    await registerRank({ agent, banks: foreign.banks });
    const source = await newAgent();
    const held = holdReadInto(agent, banks[1]!.region!, source, await source.allocate(PAGE));
    const deregistering = deregisterBanks([...foreign.banks, ...banks]);
    expect([foreign.allocations[0]!.isOpen, ...allocations.map((allocation) => allocation.isOpen)]).toEqual([
      true,
      false,
      true,
    ]);
    const { deregistered, retained } = await deregistering;
    expect(retained).toMatchObject([{ bank: { index: 1, tpRank: 2 }, code: 'BUSY' }]);
    expect(banks[1]!.state).toBe('retained');
    expect((await returnBanks(deregistered)).returned).toEqual([foreign.banks[0]!.label(), banks[0]!.label()]);
    expect([foreign.allocations[0]!.isOpen, allocations[1]!.isOpen]).toEqual([false, true]);
    await held.finish();
    expect((await releaseBanks([banks[1]!])).returned).toEqual([banks[1]!.label()]);
    await closeAgent(agent);
    await closeAgent(allocator);
  });
});
