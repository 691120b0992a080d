// Turn 1's disaggregated hand-off, on the prefill rank: it computes the prompt's blocks (the demo's KV
// content, in its real layout) and WRITEs them into the decode worker's blocks, one prepared template
// per rank pair (TP 1 → TP 2: each decode rank receives its half of the KV heads).
import type { TransferTemplate, Worker } from '@kvreuse/descriptors';
import type { Region } from '@kvreuse/native-bindings';
import type { RegisteredRank } from '@kvreuse/registry';
import { DemoTransferError } from '../errors.js';
import type { DemoRank } from './demo-rank.js';
import { writeBlockContent } from './kv-content.js';

export interface HandOffOptions {
  readonly rank: DemoRank;
  /** Prefill worker → decode worker. */
  readonly template: TransferTemplate;
  readonly decode: Worker;
  readonly hashes: readonly bigint[];
  /** Where block `i` goes in every decode rank. */
  readonly destinationSlots: readonly number[];
}

/** The registered rank's regions by bank number. */
export const regionsOf = (registered: RegisteredRank): Region[] => registered.banks.map((bank) => bank.region as Region);

export async function handOff(options: HandOffOptions): Promise<{ blocks: number; bytes: number; ms: number }> {
  const { rank, template, decode, hashes } = options;
  if (options.destinationSlots.length !== hashes.length) {
    throw new DemoTransferError('hand-off', `names ${options.destinationSlots.length} destination slots for ${hashes.length} blocks`);
  }
  // The prefill computes block i into its own slot i.
  hashes.forEach((hash, slot) => writeBlockContent(rank.part, rank.views, slot, hash));
  const { registered } = rank.endpoint.readyRank;
  const sourceBlocks = Uint32Array.from(hashes, (_, slot) => slot);
  const destinationBlocks = Uint32Array.from(options.destinationSlots);
  const prepared = template.pairs.map((_, pair) => {
    const decodeRank = template.pairDestinationRank[pair] as number;
    const { peer, ticket, regionIds } = rank.peerOf(decode, decode.ranks[decodeRank] as Worker['ranks'][number]);
    const write = rank.agent.registerTemplate({ peer, template, pair, direction: 'write', localRegions: regionsOf(registered), remoteRegions: regionIds });
    return { write, ticket };
  });
  const started = performance.now();
  let bytes = 0;
  try {
    // One post per block and rank pair, a block at a time: the first transfer to a freshly loaded peer
    // touches each page of its mapping for the first time (slow on virtual machines; see the native
    // README's "first touch"), and a whole prompt in one post would outlive transport.operation_timeout_ms.
    for (let block = 0; block < hashes.length; block++) {
      const posts = prepared.map(({ write, ticket }) =>
        rank.endpoint.ledger.postBlocks(
          { template: write, sourceBlocks: sourceBlocks.subarray(block, block + 1), destinationBlocks: destinationBlocks.subarray(block, block + 1) },
          { ticket, banks: registered.banks },
        ),
      );
      const outcomes = await Promise.all(posts.map((operation) => operation.outcome));
      await Promise.all(posts.map((operation) => operation.quiescence));
      for (const outcome of outcomes) {
        if (!outcome.ok) throw new DemoTransferError('hand-off', `WRITE of block ${block} failed: ${outcome.error.message}`);
        bytes += outcome.bytesDone;
      }
    }
  } finally {
    for (const { write } of prepared) write.release();
  }
  const ms = performance.now() - started;
  return { blocks: hashes.length, bytes, ms };
}
