import { Bank, frameworkOwner, registerRank } from '@kvreuse/registry';
import { afterEach, expect } from 'vitest';
import { liveCounters, type LoopbackWorld, openLoopbackWorld } from './loopback-world.js';

type WorldOptions = Parameters<typeof openLoopbackWorld>[0];

const ALL_CLOSED = {
  liveAgents: 0,
  liveRegistrations: 0,
  liveAllocations: 0,
  livePeers: 0,
  liveOperations: 0,
  inflightOperations: 0,
};

/**
 * Loopback worlds for a test file: each is shut down after its test, and the process-wide native
 * counters must then be back to zero.
 */
export function loopbackWorlds(options: WorldOptions = { ranks: 1, banksPerRank: 2 }) {
  let open: LoopbackWorld[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
    for (const created of open) {
      if (created.reader.isOpen) created.reader.faults.clear();
      await created.controller.shutdown({ deadlineMs: 0 });
      if (created.reader.isOpen) await created.reader.close();
      await created.closeSource();
    }
    open = [];
    expect(liveCounters()).toEqual(ALL_CLOSED);
  });
  return {
    async world(overrides: Partial<WorldOptions> = {}): Promise<LoopbackWorld> {
      const created = await openLoopbackWorld({ ...options, ...overrides });
      open.push(created);
      return created;
    },
    /** A framework-owned bank (in memory the reader allocated) whose owner refuses it back, registered as rank 1. */
    async refusedBank(world: LoopbackWorld): Promise<Bank> {
      const memory = await world.reader.allocate(1 << 16);
      const bank = Bank.adopt(
        {
          tpRank: 1,
          ppRank: 0,
          index: 0,
          memKind: 'dram',
          deviceId: 0,
          address: memory.address,
          bytes: 1n << 16n,
          blocks: 1,
          blockStride: 1n << 16n,
        },
        frameworkOwner('engine-block-pool', () => Promise.reject(new Error('framework busy'))),
      );
      world.controller.addRank(await registerRank({ agent: world.reader, banks: [bank] }));
      cleanups.push(() => memory.free());
      return bank;
    },
  };
}
