// Test workers and simulated banks for the endpoint's tests.
import {
  assembleWorker,
  type Geometry,
  layoutRankBanks,
  materialize,
  type RankPart,
  type TransferTemplate,
  type Worker,
} from '@kvreuse/descriptors';
import { type ClusterSecret } from '@kvreuse/discovery';
import { transportMetadataOf } from '@kvreuse/registry';

/** A complete worker of `tpSize` ranks (PP 1) with `blocks` blocks per bank, laid out by `layoutRankBanks`. */
export function testWorker(geometry: Geometry, tpSize: number, blocks: number, workerId: string): Worker {
  const parts: RankPart[] = [];
  for (let tpRank = 0; tpRank < tpSize; tpRank++) {
    const parallel = { tpRank, tpSize, ppRank: 0, ppSize: 1, dpRank: 0 };
    parts.push({
      version: 1,
      workerId,
      incarnation: `${workerId}-inc`,
      role: 'decode',
      geometry,
      parallel,
      banks: layoutRankBanks(geometry, parallel, { address: 0x7f00_0000_0000n + BigInt(tpRank) * 2n ** 36n, blocks }),
      transport: { agentName: `${workerId}-tp${tpRank}`, generation: 1, metadata: '' },
    });
  }
  const result = assembleWorker(parts);
  if (!result.complete) throw new Error(`test worker ${workerId} is incomplete`);
  return result.worker;
}

/** An agent as a rank part carries it: a name and a metadata blob (a live agent's, or what another process printed). */
export interface AgentMetadata {
  readonly name: string;
  metadata(): Buffer;
}

/** The rank parts of test worker `workerId` of TP `agents.length`, each carrying its agent's metadata signed for it under `secret`. */
export function signedTestParts(
  geometry: Geometry,
  workerId: string,
  agents: readonly AgentMetadata[],
  secret: ClusterSecret,
): RankPart[] {
  return testWorker(geometry, agents.length, 8, workerId).ranks.map((part, tpRank) => {
    const signed = transportMetadataOf(agents[tpRank] as AgentMetadata, secret, {
      workerId,
      incarnation: part.incarnation,
      tpRank,
      ppRank: 0,
    });
    return { ...part, transport: { ...signed, metadata: Buffer.from(signed.metadata).toString('base64') } };
  });
}

/** One simulated rank's banks, as `Uint8Array`s of each bank's size. */
export function rankBankBytes(worker: Worker, rank: number): Uint8Array[] {
  return (worker.ranks[rank] as RankPart).banks.map((bank) => new Uint8Array(Number(bank.bytes)));
}

/** Deterministic bytes for bank `bank` of rank `rank` (fills `bytes` in place). */
export function fillDeterministic(bytes: Uint8Array, rank: number, bank: number): void {
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31 + bank * 7 + rank * 131 + (i >>> 8)) & 0xff;
}

/** Copies the blocks byte for byte as the template's descriptors (`materialize`) say, between simulated ranks. */
export function copyBlocks(
  template: TransferTemplate,
  blocks: { sourceBlocks: Uint32Array; destinationBlocks: Uint32Array },
  source: readonly Uint8Array[][],
  destination: readonly Uint8Array[][],
): void {
  const plan = materialize(template, blocks);
  plan.pairs.forEach((pair, p) => {
    const from = source[template.pairSourceRank[p] as number] as Uint8Array[];
    const to = destination[template.pairDestinationRank[p] as number] as Uint8Array[];
    for (let i = 0; i < pair.count; i++) {
      const start = Number(pair.sourceOffset[i]);
      const bytes = (from[pair.sourceBank[i] as number] as Uint8Array).subarray(start, start + Number(pair.length[i]));
      (to[pair.destinationBank[i] as number] as Uint8Array).set(bytes, Number(pair.destinationOffset[i]));
    }
  });
}
