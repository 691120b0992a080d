import { type Geometry, parseRankPart, type RankPart, type Role } from '@kvreuse/descriptors';
import type { DiscoveryOperation, DiscoveryStore, LeaseId } from '../discovery/types.js';
import { RankPartPublicationError } from '../errors.js';
import { checkArray, checkNonEmptyString, checkOptionalString, checkOptionsObject, checkStore } from '../options.js';
import type { RegisteredRank } from '../registration/register-rank.js';
import { commitFenced, isEpoch } from './incarnation-epoch.js';
import { incarnationPartsPrefix, parseRankPartKey, rankPartKey, type WorkerIncarnation, workerPartsPrefix } from './rank-part-keys.js';
import { encodeRankPartRecord } from './rank-part-record.js';

/** The worker a rank belongs to, as its rank part states it. */
export interface WorkerIdentity {
  readonly workerId: string;
  /** Random per process start; a new incarnation replaces every part of the previous one. */
  readonly incarnation: string;
  readonly role: Role;
  readonly geometry: Geometry;
  readonly tpSize: number;
  readonly ppSize: number;
  readonly dpRank: number;
}

/** The native agent's view that peers need: its name, metadata generation and metadata blob (signed: `transportMetadataOf`). */
export interface TransportMetadata {
  readonly agentName: string;
  readonly generation: number;
  readonly metadata: Uint8Array;
}

/**
 * Builds the rank part of a registered rank and validates it with the descriptors schema (shard
 * split, bank count and layout). Refuses a rank whose banks are not all registered. A rank whose
 * banks carry a `planeStride` is published as rank part version 2, any other as version 1, which
 * older readers still read; a rank that names its `host` (what routers compare to tell a same-host
 * source from one across the network) is published as version 3.
 */
export function buildRankPart(worker: WorkerIdentity, rank: RegisteredRank, transport: TransportMetadata, options: { readonly host?: string } = {}): RankPart {
  checkOptionsObject('options', options);
  if (options.host !== undefined && (typeof options.host !== 'string' || options.host === '' || options.host.length > 255)) {
    throw new RankPartPublicationError('options.host', options.host, 'must be a string of 1 to 255 characters naming the machine');
  }
  checkOptionsObject('worker', worker);
  checkArray('rank.banks', checkOptionsObject('rank', rank).banks, (bank, option) => checkOptionsObject(option, bank));
  checkOptionsObject('transport', transport);
  if (!(transport.metadata instanceof Uint8Array)) throw new RankPartPublicationError('transport.metadata', transport.metadata, 'must be the agent\'s metadata blob (bytes)');
  rank.banks.forEach((bank, index) => {
    if (bank.state !== 'registered') {
      throw new RankPartPublicationError(`banks[${index}].state`, bank.state, 'only a rank whose every bank is registered can be published');
    }
  });
  const planeStrided = rank.banks.some((bank) => bank.planeStride !== undefined);
  return parseRankPart({
    version: options.host !== undefined ? 3 : planeStrided ? 2 : 1,
    workerId: worker.workerId,
    incarnation: worker.incarnation,
    role: worker.role,
    geometry: worker.geometry,
    parallel: { tpRank: rank.tpRank, tpSize: worker.tpSize, ppRank: rank.ppRank, ppSize: worker.ppSize, dpRank: worker.dpRank },
    banks: rank.banks.map((bank) => ({
      memKind: bank.memKind,
      deviceId: bank.deviceId,
      address: bank.address.toString(),
      bytes: bank.bytes.toString(),
      blocks: bank.blocks,
      blockStride: bank.blockStride.toString(),
      ...(bank.planeStride === undefined ? {} : { planeStride: bank.planeStride.toString() }),
    })),
    transport: {
      agentName: transport.agentName,
      generation: transport.generation,
      metadata: Buffer.from(transport.metadata.buffer, transport.metadata.byteOffset, transport.metadata.byteLength).toString('base64'),
    },
    ...(options.host === undefined ? {} : { host: options.host }),
  });
}

export interface PublishRankPartsOptions {
  /** The parts disappear when this lease expires or is revoked; keep it alive while the worker serves. */
  readonly lease: LeaseId;
  /** The epoch `claimIncarnationEpoch` handed the parts' incarnation. */
  readonly epoch: number;
  readonly keyPrefix?: string;
}

/**
 * Checks that parts can be published together: at least one, all of one worker incarnation, each
 * rank once. Returns the incarnation.
 */
export function checkPublishableParts(parts: readonly RankPart[], keyPrefix?: string): WorkerIncarnation {
  const first = parts[0];
  if (first === undefined) throw new RankPartPublicationError('parts', parts, 'at least one rank part is needed');
  const seen = new Set<string>();
  for (const [index, part] of parts.entries()) {
    if (part.workerId !== first.workerId) {
      throw new RankPartPublicationError(`parts[${index}].workerId`, part.workerId, `differs from parts[0] (${first.workerId})`);
    }
    if (part.incarnation !== first.incarnation) {
      throw new RankPartPublicationError(`parts[${index}].incarnation`, part.incarnation, `differs from parts[0] (${first.incarnation})`);
    }
    const key = rankPartKey(part, part.parallel, keyPrefix);
    if (seen.has(key)) throw new RankPartPublicationError(`parts[${index}].parallel`, part.parallel, 'the same rank appears twice');
    seen.add(key);
  }
  return { workerId: first.workerId, incarnation: first.incarnation };
}

/**
 * Publishes rank parts of one worker incarnation under the worker's key, in ONE discovery commit
 * that also deletes every other incarnation's parts (and any stray key under the worker): readers
 * see the old incarnation's parts or the new one's, never a mix. The commit is fenced: it applies
 * only while `epoch` is still the worker's newest, so it never deletes parts of a newer
 * incarnation and an older incarnation never displaces a newer one, however late it runs; when
 * superseded it writes nothing and throws `SupersededError`. Parts of the same incarnation that
 * other ranks published stay: ranks of one incarnation publishing at the same time never delete
 * each other's parts. Returns the revision.
 */
export async function publishRankParts(store: DiscoveryStore, parts: readonly RankPart[], options: PublishRankPartsOptions): Promise<number> {
  checkPublishing(store, parts, options);
  checkNonEmptyString('options.lease', options.lease);
  const worker = checkPublishableParts(parts, options.keyPrefix);
  if (!isEpoch(options.epoch)) {
    throw new RankPartPublicationError('epoch', options.epoch, 'an epoch is a whole number ≥ 1, as claimIncarnationEpoch hands it out');
  }
  // Listed after the epoch was claimed: an older incarnation can write nothing after that claim
  // (its own commits are fenced), so every key of another incarnation is in this listing.
  const { entries } = await store.list(workerPartsPrefix(worker.workerId, options.keyPrefix));
  const removals = entries.flatMap(({ key }): DiscoveryOperation[] =>
    parseRankPartKey(key, options.keyPrefix)?.incarnation === worker.incarnation ? [] : [{ type: 'delete', key }],
  );
  const puts = parts.map(
    (part): DiscoveryOperation => ({
      type: 'put',
      key: rankPartKey(part, part.parallel, options.keyPrefix),
      value: encodeRankPartRecord(part, options.epoch),
      lease: options.lease,
    }),
  );
  const fenceOptions = options.keyPrefix === undefined ? {} : { keyPrefix: options.keyPrefix };
  return commitFenced(store, { ...worker, epoch: options.epoch }, [...removals, ...puts], 'publishing rank parts', fenceOptions);
}

/** Withdraws every part of one worker incarnation in one commit (another incarnation's parts stay); returns the revision. */
export async function withdrawRankParts(store: DiscoveryStore, worker: WorkerIncarnation, options: { readonly keyPrefix?: string } = {}): Promise<number> {
  checkStore('store', store);
  checkOptionsObject('worker', worker);
  checkOptionalString('options.keyPrefix', checkOptionsObject('options', options).keyPrefix);
  return store.commit([{ type: 'deletePrefix', prefix: incarnationPartsPrefix(worker, options.keyPrefix) }]);
}

/** The arguments every publishing call shares: a store, an array of parts (objects) and an options object. */
export function checkPublishing(store: DiscoveryStore, parts: readonly RankPart[], options: { readonly keyPrefix?: string }): void {
  checkStore('store', store);
  checkArray('parts', parts, (part, option) => checkOptionsObject(option, part));
  checkOptionalString('options.keyPrefix', checkOptionsObject('options', options).keyPrefix);
}
