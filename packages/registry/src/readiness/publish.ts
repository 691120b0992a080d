import { type Geometry, parseRankPart, type RankPart, type Role } from '@kvreuse/descriptors';
import type { DiscoveryOperation, DiscoveryStore, LeaseId } from '../discovery/types.js';
import { RankPartPublicationError } from '../errors.js';
import type { RegisteredRank } from '../registration/register-rank.js';
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

/** The native agent's view that peers need: its name, metadata generation and metadata blob. */
export interface TransportMetadata {
  readonly agentName: string;
  readonly generation: number;
  readonly metadata: Uint8Array;
}

/**
 * Builds the rank part of a registered rank and validates it with the descriptors schema (shard
 * split, bank count and layout). Refuses a rank whose banks are not all registered.
 */
export function buildRankPart(worker: WorkerIdentity, rank: RegisteredRank, transport: TransportMetadata): RankPart {
  rank.banks.forEach((bank, index) => {
    if (bank.state !== 'registered') {
      throw new RankPartPublicationError(`banks[${index}].state`, bank.state, 'only a rank whose every bank is registered can be published');
    }
  });
  return parseRankPart({
    version: 1,
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
    })),
    transport: {
      agentName: transport.agentName,
      generation: transport.generation,
      metadata: Buffer.from(transport.metadata.buffer, transport.metadata.byteOffset, transport.metadata.byteLength).toString('base64'),
    },
  });
}

export interface PublishRankPartsOptions {
  /** The parts disappear when this lease expires or is revoked; keep it alive while the worker serves. */
  readonly lease: LeaseId;
  readonly keyPrefix?: string;
}

/**
 * Publishes rank parts of one worker incarnation under the worker's key, in ONE discovery commit
 * that also deletes every other incarnation's parts (and any stray key under the worker): readers
 * see the old incarnation's parts or the new one's, never a mix. Parts of the same incarnation that
 * other ranks published stay; since each incarnation has its own key prefix, ranks of one
 * incarnation publishing at the same time never delete each other's parts. Returns the revision.
 */
export async function publishRankParts(store: DiscoveryStore, parts: readonly RankPart[], options: PublishRankPartsOptions): Promise<number> {
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
    const key = rankPartKey(part, part.parallel, options.keyPrefix);
    if (seen.has(key)) throw new RankPartPublicationError(`parts[${index}].parallel`, part.parallel, 'the same rank appears twice');
    seen.add(key);
  }
  const { entries } = await store.list(workerPartsPrefix(first.workerId, options.keyPrefix));
  const removals = new Map<string, DiscoveryOperation>();
  for (const { key } of entries) {
    const place = parseRankPartKey(key, options.keyPrefix);
    if (place === undefined) removals.set(key, { type: 'delete', key });
    else if (place.incarnation !== first.incarnation) {
      const prefix = incarnationPartsPrefix(place, options.keyPrefix);
      removals.set(prefix, { type: 'deletePrefix', prefix });
    }
  }
  return store.commit([
    ...removals.values(),
    ...parts.map(
      (part): DiscoveryOperation => ({ type: 'put', key: rankPartKey(part, part.parallel, options.keyPrefix), value: encodeRankPartRecord(part), lease: options.lease }),
    ),
  ]);
}

/** Withdraws every part of one worker incarnation in one commit (another incarnation's parts stay); returns the revision. */
export async function withdrawRankParts(store: DiscoveryStore, worker: WorkerIncarnation, options: { readonly keyPrefix?: string } = {}): Promise<number> {
  return store.commit([{ type: 'deletePrefix', prefix: incarnationPartsPrefix(worker, options.keyPrefix) }]);
}
