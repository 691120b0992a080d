// The checksums one side of a pull computes over its rank's banks: the CRC-32 of the bytes for banks the
// host reads (dram), and for banks in GPU memory the 64-bit checksum of the native checksum kernel, run
// by the agent on the GPU (`agent.blockChecksums`), folded to the 32 bits the pin messages carry. Both
// sides of a pull hold the same kind of memory (the native layer refuses a pull between kinds), so they
// agree on the function; verifying a vram pull never copies its bytes to the host.
import type { TransferTemplate } from '@kvreuse/descriptors';
import type { Agent, Region } from '@kvreuse/native-bindings';
import type { Bank } from '@kvreuse/registry';
import { blockChecksums, type ChecksumSide, type RankBankBytes } from './block-checksum.js';
import { EndpointOptionError } from './errors.js';

/** What one side reads its checksums from: its bank bytes (dram), and its banks and agent (vram). */
export interface ChecksumSource {
  readonly bytes: RankBankBytes;
  readonly banks?: readonly Pick<Bank, 'index' | 'memKind' | 'region'>[];
  readonly agent?: Pick<Agent, 'blockChecksums'>;
}

/** 64 bits to the 32 a pin message carries: the halves xor-ed. */
const fold = (sum: bigint): number => Number((sum ^ (sum >> 32n)) & 0xffff_ffffn);

/** The checksums of `blocks` on `side` of rank pair `pair`, where its banks are (see the module's comment). */
export function sideChecksums(
  template: TransferTemplate,
  pair: number,
  side: ChecksumSide,
  source: ChecksumSource,
  blocks: Uint32Array,
): Uint32Array {
  const banks = source.banks ?? [];
  const read = side === 'source' ? template.sourceBank : template.destinationBank;
  const start = template.pairRouteStart[pair] ?? 0;
  const end = template.pairRouteStart[pair + 1] ?? start;
  const vram = banks.some((bank) => bank.memKind === 'vram' && read.subarray(start, end).includes(bank.index));
  if (!vram) return blockChecksums(template, pair, side, source.bytes, blocks);
  if (source.agent === undefined)
    throw new EndpointOptionError('agent', undefined, `the ${side} rank's agent, to sum its vram banks on the GPU`);
  const regions: (Region | undefined)[] = [];
  for (const bank of banks) regions[bank.index] = bank.region;
  return Uint32Array.from(source.agent.blockChecksums({ template, pair, side, regions, blocks }), fold);
}
