// Real loopback agents in this process for the pull tests: one agent per source rank with allocated,
// registered banks filled with deterministic bytes, and one destination agent whose banks are
// registry banks registered as a rank, with a peer book and an operation ledger.
import { buildTransferTemplate, type Geometry, type RankPart, type TransferTemplate } from '@kvreuse/descriptors';
import { OperationLedger, PeerBook } from '@kvreuse/drain';
import {
  type Agent,
  type Allocation,
  type Backend,
  loadTransport,
  type Peer,
  type PostBlocksRequest,
  type PostRequest,
  type Region,
  type RegisteredTemplate,
} from '@kvreuse/native-bindings';
import { Bank, kvreuseOwner, type RegisteredRank, registerRank, releaseRank } from '@kvreuse/registry';
import type { PullPair } from '../src/pull.js';
import { fillDeterministic, testWorker } from './workers.js';

export const transport = loadTransport();

let sequence = 0;

export interface LoopbackPull {
  readonly template: TransferTemplate;
  readonly sources: { agent: Agent; allocations: Allocation[]; regions: Region[] }[];
  readonly destination: Agent;
  readonly rank: RegisteredRank;
  readonly ledger: OperationLedger<PostRequest, PostBlocksRequest>;
  /** The pull pairs of the template, one per rank pair, in template order. */
  readonly pairs: PullPair[];
  /** Source bank bytes per source rank, indexed by bank number. */
  sourceBytes(rank: number): Buffer[];
  close(): Promise<void>;
}

/** The source and destination workers of a TP `sourceTp` → 1 pull and their template (the same in every process). */
export function pullTemplate(geometry: Geometry, sourceTp: number, blocks: number) {
  const sourceWorker = testWorker(geometry, sourceTp, blocks, 'source');
  const destinationWorker = testWorker(geometry, 1, blocks, 'destination');
  return { sourceWorker, destinationWorker, template: buildTransferTemplate(sourceWorker, destinationWorker) };
}

/** A source rank as the destination sees it: its agent's name and metadata and its region ids by bank number. */
export interface RemoteSource {
  readonly name: string;
  readonly metadata: Buffer;
  readonly regionIds: readonly number[];
}

export interface DestinationRank {
  readonly destination: Agent;
  readonly rank: RegisteredRank;
  readonly ledger: OperationLedger<PostRequest, PostBlocksRequest>;
  readonly pairs: PullPair[];
  close(): Promise<void>;
}

/** The destination rank (TP 1) on `backend`: registry banks registered as a rank, a ledger, and one registered template per pair. */
export async function openDestination(
  template: TransferTemplate,
  destinationPart: RankPart,
  backend: Backend,
  sources: readonly RemoteSource[],
): Promise<DestinationRank> {
  sequence += 1;
  const destination = await transport.createAgent({ name: `pull-destination-${process.pid}-${sequence}`, backend });
  const destinationAllocations = await Promise.all(
    destinationPart.banks.map((bank) => destination.allocate(Number(bank.bytes))),
  );
  const banks = destinationPart.banks.map((bank, index) => {
    const allocation = destinationAllocations[index]!;
    return Bank.adopt({ ...bank, tpRank: 0, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation));
  });
  const rank = await registerRank({ agent: destination, banks });
  const book = new PeerBook();
  const ledger = new OperationLedger<PostRequest, PostBlocksRequest>({
    agent: destination,
    peers: book,
    timeouts: { operationTimeoutMs: 600_000, abandonTimeoutMs: 1_200_000 },
  });
  const tickets = sources.map((source) => book.track(source.name, 'source-inc', destination.loadPeer(source.metadata)));
  const templates: RegisteredTemplate[] = [];
  const pairs = template.pairs.map((_, pair): PullPair => {
    const sourceRank = template.pairSourceRank[pair] as number;
    const ticket = tickets[sourceRank]!;
    const registered = destination.registerTemplate({
      peer: book.admit(ticket) as Peer,
      template,
      pair,
      direction: 'read',
      localRegions: rank.banks.map((bank) => bank.region!),
      remoteRegions: sources[sourceRank]!.regionIds,
    });
    templates.push(registered);
    return {
      template: registered,
      ticket,
      banks: rank.banks,
      bytes: destinationAllocations.map((allocation) => allocation.view()),
    };
  });
  return {
    destination,
    rank,
    ledger,
    pairs,
    async close() {
      ledger.stopTimers();
      for (const registered of templates) registered.release();
      await releaseRank(rank);
      await destination.close();
    },
  };
}

/** A source worker of `sourceTp` ranks (one loopback agent each, in this process) and a destination worker of TP 1. */
export async function openLoopbackPull(geometry: Geometry, sourceTp: number, blocks: number): Promise<LoopbackPull> {
  const { sourceWorker, destinationWorker, template } = pullTemplate(geometry, sourceTp, blocks);
  sequence += 1;
  const sources: LoopbackPull['sources'] = [];
  for (const [rank, part] of sourceWorker.ranks.entries()) {
    const agent = await transport.createAgent({
      name: `pull-source-${rank}-${process.pid}-${sequence}`,
      backend: 'loopback',
    });
    const allocations = await Promise.all(part.banks.map((bank) => agent.allocate(Number(bank.bytes))));
    allocations.forEach((allocation, bank) => fillDeterministic(allocation.view(), rank, bank));
    sources.push({ agent, allocations, regions: allocations.map((allocation) => agent.register(allocation)) });
  }
  const remote = sources.map(({ agent, regions }) => ({
    name: agent.name,
    metadata: agent.metadata(),
    regionIds: regions.map((region) => region.id),
  }));
  const { destination, rank, ledger, pairs, close } = await openDestination(
    template,
    destinationWorker.ranks[0] as RankPart,
    'loopback',
    remote,
  );
  return {
    template,
    sources,
    destination,
    rank,
    ledger,
    pairs,
    sourceBytes: (sourceRank) => sources[sourceRank]!.allocations.map((allocation) => allocation.view()),
    async close() {
      await close();
      for (const source of sources) {
        for (const region of source.regions) await region.deregister();
        for (const allocation of source.allocations) await allocation.free();
        await source.agent.close();
      }
    },
  };
}
