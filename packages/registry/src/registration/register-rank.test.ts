import type { Agent, Allocation } from '@kvreuse/native-bindings';
import { afterAll, describe, expect, it, vi } from 'vitest';
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
import { ucxTestsRun } from '../../test/helpers/ucx.js';
import { Bank } from '../banks/bank.js';
import { frameworkOwner, kvreuseOwner } from '../banks/owner.js';
import {
  BankAlreadyRegisteredError,
  InvalidRankBanksError,
  InvalidRegistryOptionError,
  RankRegistrationError,
} from '../errors.js';
import { registerRank, type RegistrationAgent, releaseBanks, releaseRank } from './register-rank.js';

afterAll(closeOpenAgents);

type MemorySource = 'kvreuse' | 'framework';

async function freeOpen(allocations: readonly Allocation[]): Promise<void> {
  for (const allocation of allocations) if (allocation.isOpen) await allocation.free();
}

/** A rank of `count` banks on `agent`, and a check that no bank's memory went back to its owner. */
async function rankMemory(source: MemorySource, agent: Agent, count: number) {
  if (source === 'kvreuse') {
    const { banks, allocations } = await kvreuseBanks(agent, rank, count, shape);
    return {
      banks,
      ownersKeptTheirMemory: () => allocations.every((allocation) => allocation.isOpen),
      dispose: () => freeOpen(allocations),
    };
  }
  const { banks, returned } = frameworkBanks(rank, count, shape);
  return { banks, ownersKeptTheirMemory: () => returned.length === 0, dispose: async () => {} };
}

const failureCodes = ['BACKEND', 'NOT_SUPPORTED', 'TIMEOUT', 'NO_MEMORY', 'NOT_ALLOWED'] as const;
const rankSizes = [1, 2, 3, 5, 8];
const matrix = rankSizes.flatMap((count) =>
  Array.from({ length: count }, (_, failing) => ({
    count,
    failing,
    code: failureCodes[(count + failing) % failureCodes.length]!,
  })),
);

describe.each(['kvreuse', 'framework'] as const)(
  'registerRank with %s-owned memory on the loopback agent',
  (source) => {
    it.each(matrix)(
      'first registration: bank $failing of $count fails with $code → everything as before',
      async ({ count, failing, code }) => {
        const agent = await newAgent();
        const memory = await rankMemory(source, agent, count);
        const before = snapshot(agent, memory.banks);
        agent.faults.failNth('register', failing + 1, code);

        const error = await registerRank({ agent, banks: memory.banks }).catch((e: unknown) => e);

        expect(error).toBeInstanceOf(RankRegistrationError);
        const failure = error as RankRegistrationError;
        expect(failure.bank).toMatchObject({
          index: failing,
          address: memory.banks[failing]!.address,
          bytes: BigInt(shape.bytes),
        });
        expect(failure.nativeCode).toBe(code);
        expect(failure.rolledBack.map((bank) => bank.index)).toEqual(
          Array.from({ length: failing }, (_, i) => failing - 1 - i),
        );
        expect(failure.retained).toEqual([]);
        expect(failure.message).toContain(
          `bank ${failing} of rank (tp 2, pp 0) at 0x${memory.banks[failing]!.address.toString(16)}`,
        );
        expect(snapshot(agent, memory.banks)).toEqual(before);
        expect(memory.ownersKeptTheirMemory()).toBe(true);

        // The banks are usable as they were: the same rank registers once the fault is gone.
        const registered = await registerRank({ agent, banks: memory.banks });
        expect(agent.counters().liveRegistrations).toBe(before.agent.liveRegistrations + count);
        await releaseRank(registered);
        await memory.dispose();
        await closeAgent(agent);
      },
    );

    it.each(matrix)(
      're-registration after an incarnation change: bank $failing of $count fails with $code → everything as before',
      async ({ count, failing, code }) => {
        // Incarnation 1 registers and hands its banks back; its agent goes away.
        const previous = await newAgent();
        const first = await rankMemory(source, previous, count);
        await releaseRank(await registerRank({ agent: previous, banks: first.banks }));
        expect(first.banks.every((bank) => bank.state === 'returned')).toBe(true);
        await closeAgent(previous);

        // Incarnation 2: a new agent, the banks adopted again (the framework's pool, or fresh kvreuse memory).
        const agent = await newAgent();
        const again = await rankMemory(source, agent, count);
        const before = snapshot(agent, again.banks);
        agent.faults.failNth('register', failing + 1, code);
        const error = await registerRank({ agent, banks: again.banks }).catch((e: unknown) => e);
        expect(error).toMatchObject({ code: 'RANK_REGISTRATION_FAILED', nativeCode: code, bank: { index: failing } });
        expect((error as RankRegistrationError).rolledBack).toHaveLength(failing);
        expect(snapshot(agent, again.banks)).toEqual(before);
        expect(again.ownersKeptTheirMemory()).toBe(true);
        await again.dispose();
        await closeAgent(agent);
      },
    );
  },
);

describe('registerRank against real native refusals', () => {
  it('rolls back when a bank overlaps an earlier one (INVALID_PARAM from the native layer)', async () => {
    const agent = await newAgent();
    const { banks, pool } = frameworkBanks(rank, 3, shape);
    const overlapping = [
      banks[0]!,
      banks[1]!,
      Bank.adopt(
        {
          ...rank,
          index: 2,
          memKind: 'dram',
          deviceId: 0,
          address: banks[1]!.address + BigInt(PAGE),
          bytes: BigInt(shape.bytes),
          blocks: 4,
          blockStride: BigInt(PAGE),
        },
        banks[1]!.owner,
      ),
    ];
    const before = snapshot(agent, overlapping);
    const error = (await registerRank({ agent, banks: overlapping }).catch((e: unknown) => e)) as RankRegistrationError;
    expect(error).toMatchObject({ nativeCode: 'INVALID_PARAM', bank: { index: 2 } });
    expect(error.detail).toMatch(/overlaps region/);
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([1, 0]);
    expect(snapshot(agent, overlapping)).toEqual(before);
    expect(pool.length).toBeGreaterThan(0);
    await closeAgent(agent);
  });

  it('rolls back when a vram bank is not supported (NOT_SUPPORTED, with the reason)', async () => {
    const agent = await newAgent();
    const { banks } = frameworkBanks(rank, 2, shape);
    const vram = Bank.adopt(
      {
        ...rank,
        index: 2,
        memKind: 'vram',
        deviceId: 0,
        address: 0x7000_0000_0000n,
        bytes: BigInt(shape.bytes),
        blocks: 4,
        blockStride: BigInt(PAGE),
      },
      banks[0]!.owner,
    );
    const all = [...banks, vram];
    const before = snapshot(agent, all);
    const error = (await registerRank({ agent, banks: all }).catch((e: unknown) => e)) as RankRegistrationError;
    expect(error).toMatchObject({ nativeCode: 'NOT_SUPPORTED', bank: { index: 2 } });
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([1, 0]);
    expect(snapshot(agent, all)).toEqual(before);
    await closeAgent(agent);
  });

  it('rolls back when aborted between banks (a deadline)', async () => {
    const agent = await newAgent();
    const { banks } = frameworkBanks(rank, 4, shape);
    const before = snapshot(agent, banks);
    const deadline = new AbortController();
    let registrations = 0;
    const slowAgent: RegistrationAgent = {
      name: agent.name,
      register(memory) {
        const region = agent.register(memory);
        if (++registrations === 2) deadline.abort(new Error('registration deadline of 50 ms passed'));
        return region;
      },
    };
    const error = (await registerRank({ agent: slowAgent, banks, signal: deadline.signal }).catch(
      (e: unknown) => e,
    )) as RankRegistrationError;
    expect(error).toMatchObject({
      nativeCode: 'ABORTED',
      bank: undefined,
      detail: 'registration deadline of 50 ms passed',
    });
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([1, 0]);
    expect(snapshot(agent, banks)).toEqual(before);
    await closeAgent(agent);
  });

  it('rolls back when the deadline passes between banks', async () => {
    const agent = await newAgent();
    const { banks } = frameworkBanks(rank, 4, shape);
    const before = snapshot(agent, banks);
    // The clock is the test's: the second registration stalls (as a blocked native call would) for
    // 750 ms of it, past the 250 ms budget, whatever the machine's load.
    let now = 1_000;
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => now);
    let registrations = 0;
    const stallingAgent: RegistrationAgent = {
      name: agent.name,
      register(memory) {
        const region = agent.register(memory);
        if (++registrations === 2) now += 750;
        return region;
      },
    };
    const error = (await registerRank({ agent: stallingAgent, banks, timeoutMs: 250 }).catch(
      (e: unknown) => e,
    )) as RankRegistrationError;
    clock.mockRestore();
    expect(error).toBeInstanceOf(RankRegistrationError);
    expect(error).toMatchObject({
      nativeCode: 'DEADLINE',
      bank: undefined,
      detail: 'not registered within 250 ms; 2 of 4 banks were',
    });
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([1, 0]);
    expect(snapshot(agent, banks)).toEqual(before);
    await expect(registerRank({ agent, banks, timeoutMs: -1 })).rejects.toThrow(InvalidRegistryOptionError);
    await closeAgent(agent);
  });

  it('retains, without deregistering, a bank someone referenced while the call waited between banks', async () => {
    const agent = await newAgent();
    const { banks } = frameworkBanks(rank, 3, shape);
    const abort = new AbortController();
    let registrations = 0;
    let lent: ReturnType<Bank['acquire']> | undefined;
    const agentThatLendsBank0: RegistrationAgent = {
      name: agent.name,
      register(memory) {
        const region = agent.register(memory);
        if (++registrations === 2) {
          lent = banks[0]!.acquire();
          abort.abort(new Error('shutting down'));
        }
        return region;
      },
    };
    const error = (await registerRank({ agent: agentThatLendsBank0, banks, signal: abort.signal }).catch(
      (e: unknown) => e,
    )) as RankRegistrationError;
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([1]);
    expect(error.retained).toMatchObject([{ bank: { index: 0 }, code: 'BANK_IN_USE' }]);
    expect([banks[0]!.state, banks[0]!.region?.id === undefined]).toEqual(['retained', false]);
    expect(agent.counters().liveRegistrations).toBe(1);
    lent!.release();
    await releaseRank({ ...rank, agent, banks: [banks[0]!] });
    expect(banks[0]!.state).toBe('returned');
    await closeAgent(agent);
  });

  it('retains a bank whose rollback the native layer refuses (BUSY under an in-flight read), and reports it', async () => {
    const agent = await newAgent();
    const { banks, returned } = frameworkBanks(rank, 4, shape);
    const before = snapshot(agent, banks);

    // While bank 1 is registered, a read into it starts and is held in flight; bank 3 then fails,
    // and the rollback cannot deregister bank 1.
    agent.faults.failNth('register', 4, 'BACKEND');
    let held: { finish(): Promise<void> } | undefined;
    let registrations = 0;
    const source = await newAgent();
    const sourceMemory = await source.allocate(PAGE);
    const busyAgent: RegistrationAgent = {
      name: agent.name,
      register(memory) {
        const region = agent.register(memory);
        if (++registrations === 2) held = holdReadInto(agent, region, source, sourceMemory);
        return region;
      },
    };
    const error = (await registerRank({ agent: busyAgent, banks }).catch((e: unknown) => e)) as RankRegistrationError;

    expect(error).toMatchObject({ nativeCode: 'BACKEND', bank: { index: 3 } });
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([2, 0]);
    expect(error.retained).toMatchObject([{ bank: { index: 1 }, code: 'BUSY' }]);
    expect(error.message).toMatch(/rollback FAILED for bank 1 \(BUSY: .*\), retained/);
    expect(banks.map((bank) => bank.state)).toEqual(['owned', 'retained', 'owned', 'owned']);
    expect(banks[1]!.retainedReason).toMatch(/BUSY/);
    expect(returned).toEqual([]);
    // Exactly the retained bank is still registered; nothing was handed back.
    expect(agent.counters().liveRegistrations).toBe(before.agent.liveRegistrations + 1);

    // Once the operation is terminal the drain layer may release the retained bank.
    await held!.finish();
    const retained = banks[1]!;
    retained.beginRelease();
    await retained.region!.deregister();
    retained.markDeregistered();
    await retained.completeRelease();
    expect([retained.state, returned]).toEqual(['returned', [1]]);
    expect(snapshot(agent, [])).toMatchObject({ agent: before.agent });
    await closeAgent(agent);
  });
});

/**
 * Interleavings: while `registerRank` waits between banks (it yields a turn of the event loop after
 * each bank when given a signal), something else happens to the rank. The injection is queued with
 * `setImmediate` from inside the k-th registration, so it runs at exactly the k-th await point,
 * before the call resumes.
 */
type Interference =
  | 'pending bank registered elsewhere'
  | 'pending bank released elsewhere'
  | 'registered bank released, owner throws'
  | 'abort';
const interleavingSizes = [1, 3, 6, 7];
const interferences: readonly Interference[] = [
  'pending bank registered elsewhere',
  'pending bank released elsewhere',
  'registered bank released, owner throws',
  'abort',
];
const interleavings = interleavingSizes.flatMap((count) =>
  interferences.flatMap((interference) =>
    Array.from({ length: count }, (_, point) => ({ count, point, interference }))
      // After the last bank no bank is pending any more.
      .filter(({ point }) => !(interference.startsWith('pending') && point === count - 1)),
  ),
);

/** A rank whose owners refuse their memory back (the framework's callback throws, kvreuse's free throws). */
async function refusingRankMemory(source: MemorySource, agent: Agent, count: number) {
  const refusal = () => {
    throw new Error('the owner refuses its memory back');
  };
  if (source === 'kvreuse') {
    const { banks, allocations } = await kvreuseBanks(agent, rank, count, shape);
    const refusing = banks.map((bank, index) =>
      Bank.adopt(
        bank,
        kvreuseOwner({ address: allocations[index]!.address, bytes: allocations[index]!.bytes, free: refusal }),
      ),
    );
    return {
      banks: refusing,
      ownersKeptTheirMemory: () => allocations.every((allocation) => allocation.isOpen),
      dispose: () => freeOpen(allocations),
    };
  }
  const { banks, returned } = frameworkBanks(rank, count, shape);
  const refusing = banks.map((bank) =>
    Bank.adopt(bank, frameworkOwner(bank.owner.kind === 'framework' ? bank.owner.token : undefined, refusal)),
  );
  return { banks: refusing, ownersKeptTheirMemory: () => returned.length === 0, dispose: async () => {} };
}

/** `agent`, calling `interrupt` once its registration number `point` (from 0) has returned: between two banks. */
function interruptedAt(agent: Agent, point: number, interrupt: () => void): RegistrationAgent {
  let registrations = 0;
  return {
    name: agent.name,
    register(range) {
      const region = agent.register(range);
      if (registrations++ === point) setImmediate(interrupt);
      return region;
    },
  };
}

describe.each(['kvreuse', 'framework'] as const)(
  'registerRank interrupted between banks, %s-owned memory',
  (source) => {
    it.each(interleavings)(
      '$count banks, at await point $point: $interference → no registration left, every owner as before',
      async ({ count, point, interference }) => {
        const agent = await newAgent();
        const memory = await refusingRankMemory(source, agent, count);
        const { banks } = memory;
        const before = snapshot(agent, banks);
        const abort = new AbortController();
        let interfered: Bank | undefined;
        let ownerRefusal: unknown;
        let interferingRelease: Promise<unknown> | undefined;
        const inject = () => {
          if (interference === 'abort') return abort.abort(new Error('the worker is shutting down'));
          if (interference === 'pending bank registered elsewhere') {
            interfered = banks[point + 1]!;
            return interfered.beginRegistration();
          }
          if (interference === 'pending bank released elsewhere') {
            interfered = banks[point + 1]!;
            return interfered.beginRelease();
          }
          // Another caller releases a bank this call registered; its owner refuses the memory back.
          interfered = banks[point]!;
          interferingRelease = releaseBanks([interfered]).then((release) => (ownerRefusal = release.unreturned[0]));
        };

        const error = await registerRank({
          agent: interruptedAt(agent, point, inject),
          banks,
          signal: abort.signal,
        }).catch((e: unknown) => e);
        await interferingRelease; // its deregistration ends on the agent's thread

        expect(error).toBeInstanceOf(RankRegistrationError);
        const failure = error as RankRegistrationError;
        expect(agent.counters()).toMatchObject({
          liveRegistrations: before.agent.liveRegistrations,
          registeredBytes: before.agent.registeredBytes,
        });
        expect(memory.ownersKeptTheirMemory()).toBe(true);
        expect(failure.retained).toEqual([]);
        if (interference === 'abort') {
          expect(failure).toMatchObject({
            nativeCode: 'ABORTED',
            bank: undefined,
            detail: 'the worker is shutting down',
          });
          expect(failure.rolledBack.map((bank) => bank.index)).toEqual(
            Array.from({ length: point + 1 }, (_, i) => point - i),
          );
          expect(snapshot(agent, banks)).toEqual(before);
        } else {
          expect(failure).toMatchObject({ nativeCode: 'STATE_CHANGED', bank: interfered!.label() });
          expect(failure.message).toContain(`bank ${interfered!.index} of rank (tp 2, pp 0)`);
          // Every bank but the one changed by someone else is exactly as before.
          const others = banks.filter((bank) => bank !== interfered);
          expect(snapshot(agent, others).banks).toEqual(before.banks.filter((_, index) => index !== interfered!.index));
          const expectedState = {
            'pending bank registered elsewhere': 'registering',
            'pending bank released elsewhere': 'releasing',
            'registered bank released, owner throws': 'releasing',
          }[interference];
          expect([interfered!.state, interfered!.region]).toEqual([expectedState, undefined]);
          if (interference === 'registered bank released, owner throws') {
            expect(ownerRefusal).toMatchObject({ bank: interfered!.label(), code: 'BANK_OWNER_RELEASE_FAILED' });
            expect(failure.rolledBack.map((bank) => bank.index)).toEqual(
              Array.from({ length: point + 1 }, (_, i) => point - i).filter((index) => index !== interfered!.index),
            );
          } else {
            expect(failure.rolledBack.map((bank) => bank.index)).toEqual(
              Array.from({ length: point + 1 }, (_, i) => point - i),
            );
          }
        }
        await memory.dispose();
        await closeAgent(agent);
      },
    );
  },
);

describe('registerRank when the bank changes during its own native registration', () => {
  it('deregisters the region it was just given and rolls back the others (STATE_CHANGED)', async () => {
    const agent = await newAgent();
    const { banks, returned } = frameworkBanks(rank, 3, shape);
    const before = snapshot(agent, banks);
    let registrations = 0;
    const agentThatAbortsBank1: RegistrationAgent = {
      name: agent.name,
      register(range) {
        const region = agent.register(range);
        // Someone else declares bank 1's registration failed while the native call runs.
        if (++registrations === 2) banks[1]!.abortRegistration();
        return region;
      },
    };
    const error = (await registerRank({ agent: agentThatAbortsBank1, banks }).catch(
      (e: unknown) => e,
    )) as RankRegistrationError;
    expect(error).toMatchObject({ code: 'RANK_REGISTRATION_FAILED', nativeCode: 'STATE_CHANGED', bank: { index: 1 } });
    expect(error.detail).toMatch(/during its native registration: .*cannot complete registration while owned/);
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([0]);
    expect(snapshot(agent, banks)).toEqual(before);
    expect(returned).toEqual([]);
    await closeAgent(agent);
  });

  it('rolls back after a throw that is not a native error (the error name is the code)', async () => {
    const agent = await newAgent();
    const { banks } = frameworkBanks(rank, 3, shape);
    const before = snapshot(agent, banks);
    let registrations = 0;
    const throwingAgent: RegistrationAgent = {
      name: agent.name,
      register(range) {
        if (++registrations === 3) throw new RangeError('the engine moved its pool');
        return agent.register(range);
      },
    };
    const error = (await registerRank({ agent: throwingAgent, banks }).catch(
      (e: unknown) => e,
    )) as RankRegistrationError;
    expect(error).toMatchObject({ nativeCode: 'RangeError', detail: 'the engine moved its pool', bank: { index: 2 } });
    expect(error.rolledBack.map((bank) => bank.index)).toEqual([1, 0]);
    expect(snapshot(agent, banks)).toEqual(before);
    await closeAgent(agent);
  });
});

describe('registerRank, releaseRank and releaseBanks refuse options of the wrong shape, naming the option', () => {
  const register = (): undefined => undefined;
  it.each([
    ['no options', undefined, 'options'],
    ['no agent', { banks: [] }, 'agent'],
    ['an agent without register()', { agent: { name: 'a' }, banks: [] }, 'agent.register'],
    ['an agent without a name', { agent: { register }, banks: [] }, 'agent.name'],
    ['no banks', { agent: { name: 'a', register } }, 'banks'],
    ['a timeout of NaN', { agent: { name: 'a', register }, banks: [], timeoutMs: Number.NaN }, 'timeoutMs'],
    [
      'a signal that is not an AbortSignal',
      { agent: { name: 'a', register }, banks: [], signal: { aborted: false } },
      'signal',
    ],
  ])('registerRank with %s', async (_label, options, option) => {
    const error = await registerRank(options as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidRegistryOptionError);
    expect(error).toMatchObject({ code: 'INVALID_REGISTRY_OPTION', option });
  });

  it('names NaN as NaN', async () => {
    await expect(
      registerRank({ agent: { name: 'a', register: () => undefined as never }, banks: [], timeoutMs: Number.NaN }),
    ).rejects.toThrow('timeoutMs = NaN is refused: must be a positive number of milliseconds');
  });

  it('refuses banks that are not Banks, in every function that takes banks', async () => {
    const agent = await newAgent();
    const spec = frameworkBanks(rank, 1, shape).banks[0]!.label();
    await expect(registerRank({ agent, banks: [spec as never] })).rejects.toMatchObject({
      code: 'INVALID_RANK_BANKS',
      field: 'banks[0]',
    });
    await expect(releaseBanks(undefined as never)).rejects.toMatchObject({
      code: 'INVALID_REGISTRY_OPTION',
      option: 'banks',
    });
    await expect(releaseRank({ ...rank, agent, banks: [spec as never] })).rejects.toMatchObject({
      code: 'INVALID_RANK_BANKS',
      field: 'rank.banks[0]',
    });
    await expect(releaseRank(undefined as never)).rejects.toMatchObject({
      code: 'INVALID_REGISTRY_OPTION',
      option: 'rank',
    });
    expect(agent.counters().liveRegistrations).toBe(0);
    await closeAgent(agent);
  });
});

describe('registerRank refuses what is not one owned rank, before anything native', () => {
  it('refuses an empty rank, mixed ranks, banks out of order and banks already registered', async () => {
    const agent = await newAgent();
    const before = snapshot(agent, []);
    const { banks } = frameworkBanks(rank, 2, shape);
    const other = frameworkBanks({ tpRank: 3, ppRank: 0 }, 2, shape).banks;
    await expect(registerRank({ agent, banks: [] })).rejects.toThrow(InvalidRankBanksError);
    await expect(registerRank({ agent, banks: [banks[0]!, other[1]!] })).rejects.toThrow(/belongs to another rank/);
    await expect(registerRank({ agent, banks: [banks[1]!, banks[0]!] })).rejects.toThrow(/index order/);
    const registered = await registerRank({ agent, banks });
    await expect(registerRank({ agent, banks })).rejects.toThrow(BankAlreadyRegisteredError);
    expect(agent.counters().liveRegistrations).toBe(before.agent.liveRegistrations + 2);
    await releaseRank(registered);
    expect(snapshot(agent, [])).toEqual(before);
    await closeAgent(agent);
  });
});

describe.runIf(ucxTestsRun)('registerRank on the UCX agent (key cases)', () => {
  it.each([
    { source: 'kvreuse', failing: 0, code: 'BACKEND' },
    { source: 'kvreuse', failing: 2, code: 'TIMEOUT' },
    { source: 'framework', failing: 4, code: 'NOT_SUPPORTED' },
    { source: 'framework', failing: 1, code: 'NO_MEMORY' },
  ] as const)(
    '$source memory: bank $failing of 5 fails with $code → everything as before',
    async ({ source, failing, code }) => {
      const agent = await newAgent('ucx');
      const memory = await rankMemory(source, agent, 5);
      const before = snapshot(agent, memory.banks);
      agent.faults.failNth('register', failing + 1, code);
      const error = (await registerRank({ agent, banks: memory.banks }).catch(
        (e: unknown) => e,
      )) as RankRegistrationError;
      expect(error).toMatchObject({ nativeCode: code, bank: { index: failing }, retained: [] });
      expect(error.rolledBack).toHaveLength(failing);
      expect(snapshot(agent, memory.banks)).toEqual(before);
      expect(memory.ownersKeptTheirMemory()).toBe(true);
      await releaseRank(await registerRank({ agent, banks: memory.banks }));
      expect(snapshot(agent, [])).toMatchObject({ agent: { liveRegistrations: 0, registeredBytes: 0 } });
      await memory.dispose();
      await closeAgent(agent);
    },
  );
});
