// What the tests of registerRank, releaseRank and releaseBanks share: their agents, one rank's bank shape,
// the state a failed registration must leave as it was, and a read that keeps a region busy.
import { type Agent, type Allocation, loadTransport, type Region } from '@kvreuse/native-bindings';
import type { Bank } from '../../src/index.js';
import { PAGE } from './rank-memory.js';

export const transport = loadTransport();
const openAgents = new Set<Agent>();
let agentCount = 0;

export async function newAgent(backend: 'loopback' | 'ucx' = 'loopback'): Promise<Agent> {
  const agent = await transport.createAgent({ name: `registry-${process.pid}-${agentCount++}`, backend });
  openAgents.add(agent);
  return agent;
}

export async function closeAgent(agent: Agent): Promise<void> {
  openAgents.delete(agent);
  await agent.close();
}

/** Closes every agent `newAgent` opened that a test left open; for `afterAll`. */
export async function closeOpenAgents(): Promise<void> {
  await Promise.all([...openAgents].map((agent) => agent.close()));
}

export const shape = { bytes: 4 * PAGE, blockStride: PAGE };
export const rank = { tpRank: 2, ppRank: 0 };

/** What must not change when a registration fails: native counters (agent and process) and each bank's state and owner. */
export function snapshot(agent: Agent, banks: readonly Bank[]) {
  const pick = ({
    liveRegistrations,
    registeredBytes,
    liveAllocations,
    allocatedBytes,
  }: ReturnType<Agent['counters']>) => ({
    liveRegistrations,
    registeredBytes,
    liveAllocations,
    allocatedBytes,
  });
  return {
    agent: pick(agent.counters()),
    process: pick(transport.counters()),
    banks: banks.map((bank) => ({
      state: bank.state,
      owner: bank.owner,
      region: bank.region,
      references: bank.references,
    })),
  };
}

/**
 * Starts a read by `agent` into `region` from a page of a second agent (`sourceMemory` of `source`, both
 * closed by `finish`) and holds it in flight (completion delay), so the native layer refuses to
 * deregister `region` with BUSY. `finish` lets it complete and closes everything it opened.
 */
export function holdReadInto(
  agent: Agent,
  region: Region,
  source: Agent,
  sourceMemory: Allocation,
): { finish(): Promise<void> } {
  const sourceRegion = source.register(sourceMemory);
  const peer = agent.loadPeer(source.metadata());
  agent.faults.delayCompletions('forever');
  const operation = agent.post({
    direction: 'read',
    peer,
    localRegions: [region],
    remoteRegions: [sourceRegion.id],
    descriptors: {
      sourceBank: Uint32Array.of(0),
      sourceOffset: BigUint64Array.of(0n),
      destinationBank: Uint32Array.of(0),
      destinationOffset: BigUint64Array.of(0n),
      length: BigUint64Array.of(BigInt(PAGE)),
    },
  });
  return {
    async finish() {
      agent.faults.clear();
      await operation.done;
      operation.release();
      peer.unload();
      await sourceRegion.deregister();
      await sourceMemory.free();
      await closeAgent(source);
    },
  };
}
