// Real loopback agents in this process for the fetch tests: one agent per source rank with allocated,
// registered banks filled with deterministic bytes, and one destination agent whose banks are
// registry banks registered as a rank, with a peer book and an operation ledger.
import { buildTransferTemplate, type Geometry, type RankPart, type TransferTemplate } from '@kvreuse/descriptors';
import { OperationLedger, PeerBook } from '@kvreuse/drain';
import { type Agent, type Allocation, loadTransport, type PostBlocksRequest, type PostRequest, type Region, type RegisteredTemplate } from '@kvreuse/native-bindings';
import { Bank, kvreuseOwner, registerRank, releaseRank, type RegisteredRank } from '@kvreuse/registry';
import type { FetchPair } from '../src/fetch.js';
import { fillDeterministic, testWorker } from './workers.js';

export const transport = loadTransport();

let sequence = 0;

export interface LoopbackPull {
  readonly template: TransferTemplate;
  readonly sources: { agent: Agent; allocations: Allocation[]; regions: Region[] }[];
  readonly destination: Agent;
  readonly rank: RegisteredRank;
  readonly ledger: OperationLedger<PostRequest, PostBlocksRequest>;
  /** The fetch pairs of the template, one per rank pair, in template order. */
  readonly pairs: FetchPair[];
  /** Source bank bytes per source rank, indexed by bank number. */
  sourceBytes(rank: number): Buffer[];
  close(): Promise<void>;
}

/** A source worker of `sourceTp` ranks and a destination worker of TP 1 (this process's one destination rank). */
export async function openLoopbackPull(geometry: Geometry, sourceTp: number, blocks: number): Promise<LoopbackPull> {
  const sourceWorker = testWorker(geometry, sourceTp, blocks, 'source');
  const destinationWorker = testWorker(geometry, 1, blocks, 'destination');
  const template = buildTransferTemplate(sourceWorker, destinationWorker);
  sequence += 1;
  const sources: LoopbackPull['sources'] = [];
  for (const [rank, part] of sourceWorker.ranks.entries()) {
    const agent = await transport.createAgent({ name: `fetch-source-${rank}-${process.pid}-${sequence}`, backend: 'loopback' });
    const allocations = part.banks.map((bank) => agent.allocate(Number(bank.bytes)));
    allocations.forEach((allocation, bank) => fillDeterministic(allocation.view(), rank, bank));
    sources.push({ agent, allocations, regions: allocations.map((allocation) => agent.register(allocation)) });
  }
  const destination = await transport.createAgent({ name: `fetch-destination-${process.pid}-${sequence}`, backend: 'loopback' });
  const destinationPart = destinationWorker.ranks[0] as RankPart;
  const destinationAllocations = destinationPart.banks.map((bank) => destination.allocate(Number(bank.bytes)));
  const banks = destinationPart.banks.map((bank, index) => {
    const allocation = destinationAllocations[index]!;
    return Bank.adopt({ ...bank, tpRank: 0, ppRank: 0, index, address: allocation.address }, kvreuseOwner(allocation));
  });
  const rank = await registerRank({ agent: destination, banks });
  const book = new PeerBook();
  const ledger = new OperationLedger<PostRequest, PostBlocksRequest>({ agent: destination, peers: book, timeouts: { operationTimeoutMs: 600_000, abandonTimeoutMs: 1_200_000 } });
  const templates: RegisteredTemplate[] = [];
  const pairs = template.pairs.map((_, pair): FetchPair => {
    const source = sources[template.pairSourceRank[pair] as number]!;
    const peer = destination.loadPeer(source.agent.metadata());
    const ticket = book.track(source.agent.name, 'source-inc', peer);
    const registered = destination.registerTemplate({
      peer,
      template,
      pair,
      direction: 'read',
      localRegions: rank.banks.map((bank) => bank.region!),
      remoteRegions: source.regions.map((region) => region.id),
    });
    templates.push(registered);
    return { template: registered, ticket, banks: rank.banks, bytes: destinationAllocations.map((allocation) => allocation.view()) };
  });
  return {
    template,
    sources,
    destination,
    rank,
    ledger,
    pairs,
    sourceBytes: (sourceRank) => sources[sourceRank]!.allocations.map((allocation) => allocation.view()),
    async close() {
      ledger.stopTimers();
      for (const registered of templates) registered.release();
      await releaseRank(rank);
      await destination.close();
      for (const source of sources) {
        for (const region of source.regions) region.deregister();
        for (const allocation of source.allocations) allocation.free();
        await source.agent.close();
      }
    },
  };
}
