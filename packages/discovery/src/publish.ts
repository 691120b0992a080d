// Publishing and withdrawing a worker incarnation's rank parts, each commit fenced by its epoch.
import type { RankPart } from '@kvreuse/descriptors';
import { RankPartPublicationError } from './errors.js';
import { commitFenced, isEpoch } from './incarnation-epoch.js';
import { checkArray, checkNonEmptyString, checkOptionalString, checkOptionsObject, checkStore } from './options.js';
import {
  incarnationPartsPrefix,
  parseRankPartKey,
  rankPartKey,
  type WorkerIncarnation,
  workerPartsPrefix,
} from './rank-part-keys.js';
import { encodeRankPartRecord } from './rank-part-record.js';
import type { DiscoveryOperation, DiscoveryStore, LeaseId } from './types.js';

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
      throw new RankPartPublicationError(
        `parts[${index}].workerId`,
        part.workerId,
        `differs from parts[0] (${first.workerId})`,
      );
    }
    if (part.incarnation !== first.incarnation) {
      throw new RankPartPublicationError(
        `parts[${index}].incarnation`,
        part.incarnation,
        `differs from parts[0] (${first.incarnation})`,
      );
    }
    const key = rankPartKey(part, part.parallel, keyPrefix);
    if (seen.has(key))
      throw new RankPartPublicationError(`parts[${index}].parallel`, part.parallel, 'the same rank appears twice');
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
export async function publishRankParts(
  store: DiscoveryStore,
  parts: readonly RankPart[],
  options: PublishRankPartsOptions,
): Promise<number> {
  checkPublishing(store, parts, options);
  checkNonEmptyString('options.lease', options.lease);
  const worker = checkPublishableParts(parts, options.keyPrefix);
  if (!isEpoch(options.epoch)) {
    throw new RankPartPublicationError(
      'epoch',
      options.epoch,
      'an epoch is a whole number ≥ 1, as claimIncarnationEpoch hands it out',
    );
  }
  // Listed after the epoch was claimed: an older incarnation can write nothing after that claim
  // (its own commits are fenced), so every key of another incarnation is in this listing.
  const { entries } = await store.list(workerPartsPrefix(worker.workerId, options.keyPrefix));
  const removals = entries.flatMap(({ key }): DiscoveryOperation[] =>
    parseRankPartKey(key, options.keyPrefix)?.incarnation === worker.incarnation ? [] : [{ type: 'delete', key }],
  );
  const puts = parts.map((part): DiscoveryOperation => ({
    type: 'put',
    key: rankPartKey(part, part.parallel, options.keyPrefix),
    value: encodeRankPartRecord(part, options.epoch),
    lease: options.lease,
  }));
  const fenceOptions = options.keyPrefix === undefined ? {} : { keyPrefix: options.keyPrefix };
  return commitFenced(
    store,
    { ...worker, epoch: options.epoch },
    [...removals, ...puts],
    'publishing rank parts',
    fenceOptions,
  );
}

/** Withdraws every part of one worker incarnation in one commit (another incarnation's parts stay); returns the revision. */
export async function withdrawRankParts(
  store: DiscoveryStore,
  worker: WorkerIncarnation,
  options: { readonly keyPrefix?: string } = {},
): Promise<number> {
  checkStore('store', store);
  checkOptionsObject('worker', worker);
  checkOptionalString('options.keyPrefix', checkOptionsObject('options', options).keyPrefix);
  return store.commit([{ type: 'deletePrefix', prefix: incarnationPartsPrefix(worker, options.keyPrefix) }]);
}

/** The arguments every publishing call shares: a store, an array of parts (objects) and an options object. */
export function checkPublishing(
  store: DiscoveryStore,
  parts: readonly RankPart[],
  options: { readonly keyPrefix?: string },
): void {
  checkStore('store', store);
  checkArray('parts', parts, (part, option) => checkOptionsObject(option, part));
  checkOptionalString('options.keyPrefix', checkOptionsObject('options', options).keyPrefix);
}
