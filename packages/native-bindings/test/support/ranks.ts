import {
  assembleWorker,
  type Geometry,
  layoutRankBanks,
  parseRankPart,
  type RankPart,
  type Worker,
} from '@kvreuse/descriptors';
import type { Agent, Allocation, Backend, Region } from '@kvreuse/native-bindings';
import { agentName, transport } from './backends.js';

/** One rank of a worker on its own agent: its banks laid out in one allocation, each registered as its own region. */
export interface RankSide {
  readonly agent: Agent;
  readonly allocation: Allocation;
  /** One region per bank, in the rank part's bank order. */
  readonly regions: Region[];
  readonly part: RankPart;
}

export interface RankSpec {
  readonly workerId: string;
  readonly role: 'decode' | 'prefill';
  readonly geometry: Geometry;
  readonly tpRank: number;
  readonly tpSize: number;
  readonly blocks: number;
  readonly backend: Backend;
  /** The GPU whose memory holds the rank's banks (one vram allocation); host memory when absent. */
  readonly gpu?: number;
}

export interface RankPartSpec {
  readonly workerId: string;
  readonly role: 'decode' | 'prefill';
  readonly geometry: Geometry;
  readonly parallel: { tpRank: number; tpSize: number; ppRank: number; ppSize: number };
  readonly banks: ReturnType<typeof layoutRankBanks>;
  readonly agentName: string;
  /** The rank's agent's metadata blob, base64. */
  readonly metadata: string;
}

/** The rank part of `banks`, through the parser (as a worker would publish it). */
export function parsedRankPart({
  workerId,
  role,
  geometry,
  parallel,
  banks,
  agentName,
  metadata,
}: RankPartSpec): RankPart {
  return parseRankPart({
    version: 1,
    workerId,
    incarnation: '0123456789abcdef',
    role,
    geometry,
    parallel: { ...parallel, dpRank: 0 },
    banks: banks.map((bank) => ({
      memKind: bank.memKind,
      deviceId: bank.deviceId,
      address: String(bank.address),
      bytes: String(bank.bytes),
      blocks: bank.blocks,
      blockStride: String(bank.blockStride),
    })),
    transport: { agentName, generation: 1, metadata },
  });
}

export async function openRank({
  workerId,
  role,
  geometry,
  tpRank,
  tpSize,
  blocks,
  backend,
  gpu,
}: RankSpec): Promise<RankSide> {
  const parallel = { tpRank, tpSize, ppRank: 0, ppSize: 1 };
  const agent = await transport.createAgent({ name: agentName(`${workerId}-tp${tpRank}`), backend });
  const extent = layoutRankBanks(geometry, parallel, { blocks, address: 0n }).at(-1);
  if (extent === undefined) throw new Error('no banks');
  const bytes = Number(extent.address + extent.bytes);
  const allocation = gpu === undefined ? await agent.allocate(bytes) : agent.allocateVram(gpu, bytes);
  const memory = gpu === undefined ? {} : { memKind: 'vram' as const, deviceId: gpu };
  const banks = layoutRankBanks(geometry, parallel, { blocks, address: allocation.address, ...memory });
  const regions = banks.map((bank) =>
    agent.register({ address: bank.address, bytes: bank.bytes, kind: bank.memKind, device: bank.deviceId }),
  );
  const part = parsedRankPart({
    workerId,
    role,
    geometry,
    parallel,
    banks,
    agentName: agent.name,
    metadata: agent.metadata().toString('base64'),
  });
  return { agent, allocation, regions, part };
}

/** The worker the ranks make up (complete, or the test is wrong). */
export function workerOf(ranks: readonly RankSide[]): Worker {
  const assembled = assembleWorker(ranks.map((rank) => rank.part));
  if (!assembled.complete) throw new Error('worker incomplete');
  return assembled.worker;
}

export async function closeRank(rank: RankSide): Promise<void> {
  for (const region of rank.regions) await region.deregister();
  await rank.allocation.free();
  await rank.agent.close();
}
