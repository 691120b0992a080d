import type { RankId } from '@kvreuse/descriptors';
import type { Agent, Allocation } from '@kvreuse/native-bindings';
import koffi from 'koffi';
import { Bank, frameworkOwner, kvreuseOwner } from '../../src/index.js';

export const PAGE = 4096;

export interface BankShape {
  /** Bytes of each bank (a multiple of `blockStride`). */
  readonly bytes: number;
  readonly blockStride: number;
}

const shapeOf = (shape: BankShape) => ({
  memKind: 'dram' as const,
  deviceId: 0,
  bytes: BigInt(shape.bytes),
  blocks: shape.bytes / shape.blockStride,
  blockStride: BigInt(shape.blockStride),
});

/** Banks kvreuse owns: one native allocation per bank, freed when the bank is handed back. */
export async function kvreuseBanks(
  agent: Agent,
  rank: RankId,
  count: number,
  shape: BankShape,
): Promise<{ banks: Bank[]; allocations: Allocation[] }> {
  const allocations = await Promise.all(Array.from({ length: count }, () => agent.allocate(shape.bytes)));
  const banks = allocations.map((allocation, index) =>
    Bank.adopt({ ...rank, index, ...shapeOf(shape), address: allocation.address }, kvreuseOwner(allocation)),
  );
  return { banks, allocations };
}

/**
 * Banks the framework owns: one JavaScript Buffer per rank (the engine's KV pool), banks laid out
 * in it page-aligned. kvreuse may only give them back through the release callback, which records
 * the bank index in `returned`.
 */
export function frameworkBanks(
  rank: RankId,
  count: number,
  shape: BankShape,
): { banks: Bank[]; pool: Buffer; returned: number[] } {
  const pool = Buffer.alloc(count * shape.bytes + PAGE);
  const start = BigInt(Math.ceil(Number(koffi.address(pool)) / PAGE) * PAGE);
  const returned: number[] = [];
  const banks = Array.from({ length: count }, (_, index) =>
    Bank.adopt(
      { ...rank, index, ...shapeOf(shape), address: start + BigInt(index * shape.bytes) },
      frameworkOwner({ pool, index }, () => void returned.push(index)),
    ),
  );
  return { banks, pool, returned };
}
