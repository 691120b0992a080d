// Turn 2's pull, on the prefill rank, through the endpoint's primitives: pin the prefix at every decode
// rank (PinClient), read it with one prepared template per rank pair and verify each block's checksum
// (fetchPrefix), then check every committed byte against the demo's KV content and recompute the rest.
// The one module to swap for `ReuseEndpoint.fetch` once the endpoint offers it.
import type { RankPart, TransferTemplate, Worker } from '@kvreuse/descriptors';
import { type FetchOptions, type FetchPair, fetchPrefix, type HeldPin, type PinClient, type RecomputeReason } from '@kvreuse/endpoint';
import type { RegisteredTemplate } from '@kvreuse/native-bindings';
import type { RegisteredRank } from '@kvreuse/registry';
import type { DemoRank } from './demo-rank.js';
import { regionsOf } from './hand-off.js';
import { holdsBlockContent, writeBlockContent } from './kv-content.js';
import type { PullPrediction, PullReport } from './rank-messages.js';

export interface PullOptions {
  readonly rank: DemoRank;
  readonly client: PinClient;
  /** Decode worker → prefill worker. */
  readonly template: TransferTemplate;
  readonly decode: Worker;
  readonly hashes: readonly bigint[];
  readonly source: { readonly workerId: string; readonly incarnation: string; readonly epoch: number };
  readonly link: FetchOptions['link'];
  readonly prediction?: PullPrediction;
  /** Called once every pin is granted, before anything is posted (the demo kills a rank there). */
  readonly holdAfterPins?: (granted: readonly number[]) => Promise<void>;
}

function describeReason(reason: RecomputeReason): string {
  const from = `from block ${reason.fromBlock}`;
  switch (reason.kind) {
    case 'pin-granted-fewer':
      return `${from}: source rank tp${reason.sourceRank.tpRank} pinned only ${reason.granted} blocks`;
    case 'pin-lost':
      return `${from}: pin lost (${reason.reason}): ${reason.detail}`;
    case 'operation-failed':
      return `${from}: the read of rank pair ${reason.pair} failed (${reason.code}): ${reason.detail}`;
    case 'checksum-mismatch':
      return `${from}: checksum mismatch on rank pair ${reason.pair}`;
  }
}

/** Zeroes blocks `0 … count − 1` of every bank: what arrives must be the pull's, not what was there. */
function clearBlocks(part: RankPart, views: readonly Uint8Array[], count: number): void {
  part.banks.forEach((bank, index) => (views[index] as Uint8Array).fill(0, 0, count * Number(bank.blockStride)));
}

export async function pullPrefix(options: PullOptions): Promise<PullReport> {
  const { rank, template, decode, hashes } = options;
  const part = rank.part;
  const registered = rank.endpoint.registered as RegisteredRank;
  const destinationBlocks = Uint32Array.from(hashes, (_, slot) => slot);
  clearBlocks(part, rank.views, hashes.length);

  const asked = await Promise.allSettled(
    decode.ranks.map((sourcePart) =>
      options.client.pin({
        peer: rank.peerOf(decode, sourcePart).peer,
        source: { ...options.source, rank: { tpRank: sourcePart.parallel.tpRank, ppRank: 0 } },
        start: 0,
        hashes: BigUint64Array.from(hashes),
        wantsChecksums: true,
      }),
    ),
  );
  const pins = asked.flatMap((answer) => (answer.status === 'fulfilled' ? [answer.value] : []));
  const refused = asked.flatMap((answer) => (answer.status === 'rejected' ? [`from block 0: pin refused: ${(answer.reason as Error).message}`] : []));
  await options.holdAfterPins?.(pins.map((pin) => pin.positions.count));

  let receipt: Awaited<ReturnType<typeof fetchPrefix>> | undefined;
  const prepared: RegisteredTemplate[] = [];
  if (refused.length === 0) {
    const pairs = template.pairs.map((_, pair): FetchPair => {
      const sourceRank = template.pairSourceRank[pair] as number;
      const { peer, ticket, regionIds } = rank.peerOf(decode, decode.ranks[sourceRank] as RankPart);
      const read = rank.agent.registerTemplate({ peer, template, pair, direction: 'read', localRegions: regionsOf(registered), remoteRegions: regionIds });
      prepared.push(read);
      return { template: read, ticket, banks: registered.banks, bytes: rank.views };
    });
    receipt = await fetchPrefix({
      ledger: rank.endpoint.ledger,
      pairs,
      pins: pins as HeldPin[],
      destinationBlocks,
      verify: 'full',
      policy: 'recompute',
      link: options.link,
      ...(options.prediction === undefined ? {} : { prediction: { ...options.prediction, blockTokens: part.geometry.blockTokens } }),
    });
  } else {
    await Promise.allSettled(pins.map((pin) => pin.release()));
  }
  for (const read of prepared) read.release();

  const committed = receipt?.blocks ?? 0;
  let verified = true;
  for (let slot = 0; slot < committed; slot++) verified &&= holdsBlockContent(part, rank.views, slot, hashes[slot] as bigint);
  // Recompute: the prefill computes what it could not take (and holds nothing unverified of the pull).
  for (let slot = committed; slot < hashes.length; slot++) writeBlockContent(part, rank.views, slot, hashes[slot] as bigint);
  return {
    requested: hashes.length,
    blocks: committed,
    bytes: receipt?.bytes ?? 0,
    verified,
    ms: receipt?.ms ?? 0,
    gbps: (receipt?.gbps ?? 0) * 8,
    recomputed: { blocks: hashes.length - committed, reasons: receipt === undefined ? refused : receipt.recomputed.reasons.map(describeReason) },
    ...(receipt?.saving === undefined ? {} : { saving: receipt.saving }),
  };
}
