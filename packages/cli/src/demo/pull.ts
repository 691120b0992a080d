// Turn 2's pull, on the prefill rank: `ReuseEndpoint.pull` pins the prefix at every decode rank,
// reads it with one prepared template per rank pair and verifies the blocks' checksums as the
// `endpoint.verify` setting says; then every committed byte is checked against the demo's KV content,
// and the rest is recomputed.
import type { RankPart } from '@kvreuse/descriptors';
import { type BeforeRelease, calibrationSample, type RecomputeReason, type ReuseEndpoint } from '@kvreuse/endpoint';
import type { MemoryKind } from '@kvreuse/native-bindings';
import type { PullHint } from '@kvreuse/router';
import { holdsBlockContent, writeBlockContent } from './kv-content.js';
import type { PullPrediction, PullReport } from './rank-messages.js';

export interface PullAndRecomputeOptions {
  /** The prefill rank's endpoint, ready. */
  readonly endpoint: ReuseEndpoint;
  /** The prefill rank's part, to lay its blocks out. */
  readonly part: RankPart;
  /** The bytes of its banks (with banks in vram: their host copies, which the pull does not write). */
  readonly views: readonly Uint8Array[];
  /** With banks in vram: copies blocks from the host copies up to the GPU. */
  readonly upload: (slots: readonly number[]) => void;
  /** Where its banks are: a pull into vram is checked by the pull's checksums alone (the GPU's kernel on both sides). */
  readonly memory: MemoryKind;
  /** The router's decision: the source, its epoch, the prefix's positions and hashes, its tier and link. */
  readonly hint: PullHint;
  readonly prediction?: PullPrediction;
  /** Keeps the pins held once nothing reads them, until it settles (`PullRequest.beforeRelease`). */
  readonly beforeRelease?: BeforeRelease;
  /** The source serves an engine's own memory: its bytes are the engine's, checked by the pull's checksums alone. */
  readonly engineContent?: boolean;
}

export function describeReason(reason: RecomputeReason): string {
  const from = `from block ${reason.fromBlock}`;
  switch (reason.kind) {
    case 'pin-granted-fewer':
      return `${from}: source rank tp${reason.sourceRank.tpRank} pinned only ${reason.granted} blocks`;
    case 'pin-refused':
      return `${from}: source rank tp${reason.sourceRank.tpRank} gave no pin (${reason.reason}): ${reason.detail}`;
    case 'pin-lost':
      return `${from}: pin lost (${reason.reason}): ${reason.detail}`;
    case 'operation-failed':
      return `${from}: the read of rank pair ${reason.pair} failed (${reason.code}): ${reason.detail}`;
    case 'checksum-mismatch':
      return `${from}: checksum mismatch on rank pair ${reason.pair}`;
  }
}

/** Zeroes blocks `0 … count − 1` of every bank: what is there after the pull must be the pull's. */
function clearBlocks(part: RankPart, views: readonly Uint8Array[], count: number): void {
  part.banks.forEach((bank, index) => (views[index] as Uint8Array).fill(0, 0, count * Number(bank.blockStride)));
}

export async function pullAndRecompute(options: PullAndRecomputeOptions): Promise<PullReport> {
  const { endpoint, part, views, hint, prediction, beforeRelease } = options;
  const hashes = Array.from(hint.hashes);
  // The prefix goes to this rank's blocks 0 … count − 1.
  const slots = hashes.map((_, slot) => slot);
  const destinationBlocks = Uint32Array.from(slots);
  clearBlocks(part, views, hashes.length);
  options.upload(slots);
  const receipt = await endpoint.pull({
    hint,
    destinationBlocks,
    policy: 'recompute',
    ...(prediction === undefined ? {} : { prediction: { ...prediction, blockTokens: hint.blockTokens } }),
    ...(beforeRelease === undefined ? {} : { beforeRelease }),
  });
  const calibration = calibrationSample(receipt);
  // The engine's bytes, and bytes in vram, are checked by the pull's checksums alone.
  const byChecksums = options.engineContent === true || options.memory === 'vram';
  let verified = !byChecksums || receipt.checkedBlocks === receipt.blocks;
  for (let slot = 0; slot < receipt.blocks && !byChecksums; slot++)
    verified &&= holdsBlockContent(part, views, slot, hashes[slot] as bigint);
  // Recompute: the prefill computes what it could not take (and keeps nothing unverified of the pull).
  for (let slot = receipt.blocks; slot < hashes.length; slot++)
    writeBlockContent(part, views, slot, hashes[slot] as bigint);
  options.upload(slots.slice(receipt.blocks));
  return {
    memory: options.memory,
    requested: receipt.requested,
    blocks: receipt.blocks,
    bytes: receipt.bytes,
    verified,
    verify: receipt.verify,
    checkedBlocks: receipt.checkedBlocks,
    ms: receipt.ms,
    gbitPerS: receipt.gbytesPerS * 8,
    recomputed: { blocks: receipt.recomputed.blocks, reasons: receipt.recomputed.reasons.map(describeReason) },
    ...(receipt.saving === undefined ? {} : { saving: receipt.saving }),
    ...(calibration === undefined ? {} : { calibration }),
  };
}
