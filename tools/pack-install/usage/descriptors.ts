import {
  assembleWorker,
  buildTransferTemplate,
  layoutRankBanks,
  materialize,
  referenceGeometries,
  type RankPart,
  type Role,
} from '@kvreuse/descriptors';

const geometry = referenceGeometries['qwen3-0.6b'];

/** A worker of one TP rank whose banks start at `address`. */
function worker(role: Role, address: bigint) {
  const parallel = { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1, dpRank: 0 };
  const part: RankPart = {
    version: 1,
    workerId: role,
    incarnation: `${role}-1`,
    role,
    geometry,
    parallel,
    banks: layoutRankBanks(geometry, parallel, { address, blocks: 8 }),
    transport: { agentName: role, generation: 1, metadata: '' },
  };
  const assembled = assembleWorker([part]);
  if (!assembled.complete) throw new Error(`incomplete: ${JSON.stringify(assembled)}`);
  return assembled.worker;
}

const template = buildTransferTemplate(worker('decode', 0x7f00_0000_0000n), worker('prefill', 0x7e00_0000_0000n));
const plan = materialize(template, { sourceBlocks: Uint32Array.of(5, 7), destinationBlocks: Uint32Array.of(0, 1) });
console.log(
  JSON.stringify({ pairs: plan.pairs.length, descriptors: plan.descriptorCount, totalBytes: String(plan.totalBytes) }),
);
