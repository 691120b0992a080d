import {
  layoutRankBanks,
  parseRankPart,
  type RankPart,
  referenceGeometries,
  type ReferenceModel,
} from '@kvreuse/descriptors';

export interface FakeWorker {
  readonly workerId: string;
  readonly incarnation: string;
  readonly tpSize: number;
  readonly ppSize?: number;
  readonly model?: ReferenceModel;
  readonly generation?: number;
  /** Memory kind of every bank (default `dram`). */
  readonly memKind?: 'dram' | 'vram';
}

/**
 * Rank parts as a worker would publish them, for tests about discovery and readiness (no memory
 * behind the addresses: readiness never touches it).
 */
export function rankPartsOf(worker: FakeWorker): RankPart[] {
  const { workerId, incarnation, tpSize, ppSize = 1, model = 'qwen3-0.6b', generation = 1, memKind = 'dram' } = worker;
  const geometry = referenceGeometries[model];
  const parts: RankPart[] = [];
  for (let ppRank = 0; ppRank < ppSize; ppRank++) {
    for (let tpRank = 0; tpRank < tpSize; tpRank++) {
      const banks = layoutRankBanks(
        geometry,
        { tpRank, tpSize, ppRank, ppSize },
        { address: BigInt(ppRank * tpSize + tpRank + 1) << 36n, blocks: 4, memKind },
      );
      parts.push(
        parseRankPart({
          version: 1,
          workerId,
          incarnation,
          role: 'decode',
          geometry,
          parallel: { tpRank, tpSize, ppRank, ppSize, dpRank: 0 },
          banks: banks.map((bank) => ({
            ...bank,
            address: bank.address.toString(),
            bytes: bank.bytes.toString(),
            blockStride: bank.blockStride.toString(),
          })),
          transport: {
            agentName: `${workerId}-tp${tpRank}-pp${ppRank}`,
            generation,
            metadata: Buffer.from(`blob of ${incarnation}`).toString('base64'),
          },
        }),
      );
    }
  }
  return parts;
}
