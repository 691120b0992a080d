import type {
  Agent,
  AgentOptions,
  Allocation,
  Backend,
  Peer,
  Region,
  TransferDescriptors,
} from '@kvreuse/native-bindings';
import { agentName, transport } from './backends.js';
import { fillPattern } from './content.js';

/**
 * Two agents of one backend in this process (`options` for both), each with one registered bank, each having loaded the
 * other's metadata. `source` holds the pattern (seed); `reader`'s bank starts zeroed.
 */
export interface AgentPair {
  readonly source: Agent;
  readonly reader: Agent;
  readonly sourceBank: Allocation;
  readonly readerBank: Allocation;
  readonly sourceRegion: Region;
  readonly readerRegion: Region;
  /** The source, as the reader knows it. */
  readonly sourcePeer: Peer;
  /** The reader, as the source knows it. */
  readonly readerPeer: Peer;
  /** Deregisters, frees and closes everything (operations must be released first). */
  close(): Promise<void>;
}

export async function openPair(
  backend: Backend,
  bytes: number,
  seed: number,
  options: Pick<AgentOptions, 'ucx'> = {},
): Promise<AgentPair> {
  const source = await transport.createAgent({ name: agentName(`${backend}-source`), backend, ...options });
  const reader = await transport.createAgent({ name: agentName(`${backend}-reader`), backend, ...options });
  const sourceBank = await source.allocate(bytes);
  const readerBank = await reader.allocate(bytes);
  fillPattern(sourceBank.view(), seed);
  readerBank.view().fill(0);
  const sourceRegion = source.register(sourceBank);
  const readerRegion = reader.register(readerBank);
  const sourcePeer = await reader.loadPeerInBackground(source.metadata());
  const readerPeer = await source.loadPeerInBackground(reader.metadata());
  return {
    source,
    reader,
    sourceBank,
    readerBank,
    sourceRegion,
    readerRegion,
    sourcePeer,
    readerPeer,
    async close() {
      await readerRegion.deregister();
      await sourceRegion.deregister();
      await readerBank.free();
      await sourceBank.free();
      await reader.close();
      await source.close();
    },
  };
}

/** The process-wide counters that must be back to zero once every handle is closed. */
export function liveCounters() {
  const c = transport.counters();
  return {
    liveAgents: c.liveAgents,
    liveRegistrations: c.liveRegistrations,
    registeredBytes: c.registeredBytes,
    liveAllocations: c.liveAllocations,
    allocatedBytes: c.allocatedBytes,
    livePeers: c.livePeers,
    liveOperations: c.liveOperations,
    inflightOperations: c.inflightOperations,
    pendingNotifications: c.pendingNotifications,
    inflightRequests: c.inflightRequests,
    unresponsivePeers: c.unresponsivePeers,
  };
}

export const allZero = {
  liveAgents: 0,
  liveRegistrations: 0,
  registeredBytes: 0,
  liveAllocations: 0,
  allocatedBytes: 0,
  livePeers: 0,
  liveOperations: 0,
  inflightOperations: 0,
  pendingNotifications: 0,
  inflightRequests: 0,
  unresponsivePeers: 0,
};

/** A READ by the pair's reader of `descriptors`, bank 0 on both sides. */
export function readRequest(pair: AgentPair, descriptors: TransferDescriptors) {
  return {
    direction: 'read' as const,
    peer: pair.sourcePeer,
    descriptors,
    localRegions: [pair.readerRegion],
    remoteRegions: [pair.sourceRegion.id],
  };
}
