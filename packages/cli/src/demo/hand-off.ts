// Turn 1's disaggregated hand-off, on the prefill rank: it computes the prompt's blocks (the demo's KV
// content, in its real layout) and its endpoint pushes them into the decode worker's blocks (TP 1 → TP 2:
// each decode rank receives its half of the KV heads).
import type { RankPart } from '@kvreuse/descriptors';
import { PushFailedError, type PushReceipt, type ReuseEndpoint } from '@kvreuse/endpoint';
import { DemoTransferError } from '../errors.js';
import { writeBlockContent } from './kv-content.js';

export interface HandOffOptions {
  /** The prefill rank's endpoint, ready. */
  readonly endpoint: ReuseEndpoint;
  /** The prefill rank's part, to lay its blocks out. */
  readonly part: RankPart;
  readonly decodeWorkerId: string;
  readonly hashes: readonly bigint[];
  /** Where block `i` goes in every decode rank. */
  readonly destinationSlots: readonly number[];
  /** The bytes of the prefill rank's banks it computes the blocks in (with banks in vram: their host copies). */
  readonly views: readonly Uint8Array[];
  /** With banks in vram: copies the computed blocks up to the GPU before the push. */
  readonly upload: (slots: readonly number[]) => void;
}

export async function handOff(options: HandOffOptions): Promise<PushReceipt> {
  const { endpoint, part, hashes } = options;
  // The prefill computes block i into its own slot i.
  const slots = hashes.map((_, slot) => slot);
  hashes.forEach((hash, slot) => writeBlockContent(part, options.views, slot, hash));
  options.upload(slots);
  try {
    return await endpoint.push({
      workerId: options.decodeWorkerId,
      sourceBlocks: Uint32Array.from(slots),
      destinationBlocks: Uint32Array.from(options.destinationSlots),
    });
  } catch (error) {
    if (error instanceof PushFailedError) throw new DemoTransferError('hand-off', error.why);
    throw error;
  }
}
