// Incarnation fencing. Each incarnation of a worker claims an epoch from discovery once: the
// revision of the commit that records the claim, so a later claim always has a larger epoch, on
// every backend. The claim rewrites the worker's epoch fence (`workerEpochKey`), whose modification
// revision is therefore the newest epoch; every fenced write is a commit on the condition that the
// fence is still at the writer's epoch. An older incarnation that wakes up late (a process stopped
// past its lease, a publish racing a restart) finds the fence moved and writes nothing.
import { entryText } from './common.js';
import type { DiscoveryOperation, DiscoveryStore } from './types.js';
import {
  DiscoveryCompareError,
  DiscoveryUnavailableError,
  InvalidDiscoveryOptionError,
  SupersededError,
} from './errors.js';
import { checkArray, checkOptionalString, checkOptionsObject, checkStore } from './options.js';
import { incarnationEpochKey, type WorkerIncarnation, workerEpochKey } from './rank-part-keys.js';

/** A worker incarnation and the epoch discovery handed it. */
export interface IncarnationEpoch extends WorkerIncarnation {
  readonly epoch: number;
}

export interface IncarnationEpochOptions {
  readonly keyPrefix?: string;
}

/** The newest epoch claimed for a worker and the incarnation that claimed it, or undefined if none has. */
export async function readWorkerEpoch(
  store: DiscoveryStore,
  workerId: string,
  options: IncarnationEpochOptions = {},
): Promise<{ readonly epoch: number; readonly incarnation: string } | undefined> {
  checkStoreAndOptions(store, options);
  const fence = await store.get(workerEpochKey(workerId, options.keyPrefix));
  return fence === undefined ? undefined : { epoch: fence.modRevision, incarnation: entryText(fence) };
}

const claimAttempts = 16;

/**
 * Claims the epoch of a worker incarnation. Idempotent per incarnation: every rank of it (in this
 * process or another) gets the same epoch. An incarnation that a newer one has superseded is
 * refused with `SupersededError` and can never claim again, so a late rank of an old incarnation
 * cannot take the worker back.
 */
export async function claimIncarnationEpoch(
  store: DiscoveryStore,
  worker: WorkerIncarnation,
  options: IncarnationEpochOptions = {},
): Promise<IncarnationEpoch> {
  checkStoreAndOptions(store, options);
  checkOptionsObject('worker', worker);
  const fenceKey = workerEpochKey(worker.workerId, options.keyPrefix);
  const recordKey = incarnationEpochKey(worker, options.keyPrefix);
  for (let attempt = 0; attempt < claimAttempts; attempt++) {
    // The record first, then the fence: a claim commits both at once and the fence only moves on, so a
    // fence read after the record is at least as new as it. Read together (or the fence first), another
    // rank's claim committed between the two reads showed its record beside the fence from before it,
    // and this rank took its own incarnation for superseded.
    const record = await store.get(recordKey);
    const fence = await store.get(fenceKey);
    if (record !== undefined) {
      const claimed = { ...worker, epoch: record.createRevision };
      if (fence?.modRevision !== claimed.epoch) {
        throw superseded(
          claimed,
          fence === undefined ? undefined : { epoch: fence.modRevision, incarnation: entryText(fence) },
          'claiming an epoch',
        );
      }
      return claimed;
    }
    try {
      const epoch = await store.commit(
        [
          { type: 'put', key: fenceKey, value: worker.incarnation },
          { type: 'put', key: recordKey, value: worker.incarnation },
        ],
        {
          compare: [
            { key: fenceKey, modRevision: fence?.modRevision ?? 0 },
            { key: recordKey, modRevision: 0 },
          ],
        },
      );
      return { ...worker, epoch };
    } catch (error) {
      // Another claim came first (another incarnation, or another rank of this one): read again.
      if (!(error instanceof DiscoveryCompareError)) throw error;
    }
  }
  throw new DiscoveryUnavailableError(
    store.backend,
    `claiming an epoch (${claimAttempts} attempts lost to concurrent claims)`,
    fenceKey,
  );
}

/** Whether a value can be an epoch: a whole number ≥ 1 (what `claimIncarnationEpoch` hands out). */
export function isEpoch(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

/** Throws `SupersededError` unless the incarnation still holds the worker's newest epoch. */
export async function assertNewestEpoch(
  store: DiscoveryStore,
  claimed: IncarnationEpoch,
  operation: string,
  options: IncarnationEpochOptions = {},
): Promise<void> {
  checkStoreAndOptions(store, options);
  checkClaimed(claimed);
  const newest = await readWorkerEpoch(store, claimed.workerId, options);
  if (newest?.epoch !== claimed.epoch) throw superseded(claimed, newest, operation);
}

/**
 * Commits the operations on the condition that the incarnation still holds the worker's newest
 * epoch; otherwise writes nothing and throws `SupersededError`. Returns the revision.
 */
export async function commitFenced(
  store: DiscoveryStore,
  claimed: IncarnationEpoch,
  operations: readonly DiscoveryOperation[],
  operation: string,
  options: IncarnationEpochOptions = {},
): Promise<number> {
  checkStoreAndOptions(store, options);
  checkClaimed(claimed);
  checkArray('operations', operations, (element, option) => checkOptionsObject(option, element));
  const fenceKey = workerEpochKey(claimed.workerId, options.keyPrefix);
  try {
    return await store.commit(operations, { compare: [{ key: fenceKey, modRevision: claimed.epoch }] });
  } catch (error) {
    if (!(error instanceof DiscoveryCompareError) || error.key !== fenceKey) throw error;
    const newest = await readWorkerEpoch(store, claimed.workerId, options).catch(() => undefined);
    throw superseded(
      claimed,
      newest ?? (error.actual === 0 ? undefined : { epoch: error.actual, incarnation: undefined }),
      operation,
    );
  }
}

function checkStoreAndOptions(store: DiscoveryStore, options: IncarnationEpochOptions): void {
  checkStore('store', store);
  checkOptionalString('options.keyPrefix', checkOptionsObject('options', options).keyPrefix);
}

function checkClaimed(claimed: IncarnationEpoch): void {
  if (!isEpoch(checkOptionsObject('claimed', claimed).epoch)) {
    throw new InvalidDiscoveryOptionError(
      'claimed.epoch',
      claimed.epoch,
      'must be an epoch claimIncarnationEpoch handed out (a whole number ≥ 1)',
    );
  }
}

function superseded(
  claimed: IncarnationEpoch,
  newest: { readonly epoch: number; readonly incarnation: string | undefined } | undefined,
  operation: string,
): SupersededError {
  return new SupersededError(
    claimed.workerId,
    claimed.incarnation,
    claimed.epoch,
    newest?.epoch,
    newest?.incarnation,
    operation,
  );
}
