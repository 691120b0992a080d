// The 42-block Qwen3-0.6B prefix as a transfer template: both sides hold the prefix as one fully
// contiguous TP 1 bank in one region (the layout the explicit pull's descriptors describe), so the
// template post and the explicit post move the same bytes between the same memory.
import {
  assembleWorker,
  buildTransferTemplate,
  type Geometry,
  layoutRankBanks,
  referenceGeometries,
  type TransferTemplate,
  type Worker,
} from '@kvreuse/descriptors';
import type { Agent, Peer, RegisteredTemplate } from '@kvreuse/native-bindings';
import { QWEN3_PREFIX_BLOCKS, QWEN3_PREFIX_BYTES } from '../test/support/qwen3.js';
import { parsedRankPart } from '../test/support/ranks.js';
import { seconds } from './reads.js';

const geometry: Geometry = { ...referenceGeometries['qwen3-0.6b'], bankLayout: 'fully-contiguous' };
const parallel = { tpRank: 0, tpSize: 1, ppRank: 0, ppSize: 1 };

/** A TP 1 worker whose one bank of the prefix's blocks starts at `address`. */
function workerAt(
  workerId: string,
  role: 'decode' | 'prefill',
  address: bigint,
  agentName: string,
  metadata: string,
): Worker {
  const [bank] = layoutRankBanks(geometry, parallel, { blocks: QWEN3_PREFIX_BLOCKS, address });
  if (bank === undefined || bank.bytes !== BigInt(QWEN3_PREFIX_BYTES))
    throw new Error('the prefix bank does not match the benchmark bank');
  const part = parsedRankPart({ workerId, role, geometry, parallel, banks: [bank], agentName, metadata });
  const assembled = assembleWorker([part]);
  if (!assembled.complete) throw new Error('prefix worker incomplete');
  return assembled.worker;
}

/** The template from the peer's bank (its one advertised region) to `agent`'s bank at `address`. */
export function prefixTemplate(agent: Agent, address: bigint, peer: Peer, peerMetadata: string): TransferTemplate {
  const [remote] = peer.regions();
  if (remote === undefined) throw new Error('the source advertises no region');
  const source = workerAt('bench-source', 'decode', remote.address, 'bench-source', peerMetadata);
  const destination = workerAt('bench-reader', 'prefill', address, agent.name, agent.metadata().toString('base64'));
  return buildTransferTemplate(source, destination);
}

/** Block i of the source to block i of the destination, for every block of the prefix. */
export const prefixBlocks = {
  sourceBlocks: Uint32Array.from({ length: QWEN3_PREFIX_BLOCKS }, (_, i) => i),
  destinationBlocks: Uint32Array.from({ length: QWEN3_PREFIX_BLOCKS }, (_, i) => i),
};

/** Seconds from posting the prefix's block lists on `template` to its completion. */
export async function timePreparedPull(agent: Agent, template: RegisteredTemplate): Promise<number> {
  const start = process.hrtime.bigint();
  const operation = agent.postBlocks({ template, ...prefixBlocks });
  await operation.done;
  operation.release();
  return seconds(start);
}
