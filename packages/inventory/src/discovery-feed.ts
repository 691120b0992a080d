// Carries inventory batches through discovery: each worker writes its latest batch to one key,
// `<prefix><workerId>`, under its lease; followers watch the prefix and apply every batch in order.
// A follower that joins late or must resync sees only the latest batch of each worker, so workers
// re-announce what they retain before it expires (the inventory is advisory: it catches up within
// one expiry period). When a worker's key disappears (its lease ended) it is forgotten. Every batch
// carries its incarnation's epoch and is written fenced by it, so a superseded incarnation (a
// zombie) never replaces a newer one's batch. Once a worker has published its complete inventory it
// says so in that batch and in every later one of the incarnation (the follower may see only the latest).
import {
  checkKeySegment,
  commitFenced,
  DiscoveryCompareError,
  type DiscoveryEntry,
  type DiscoveryStore,
  type DiscoveryWatch,
  isEpoch,
  type LeaseId,
  RankPartPublicationError,
  SupersededError,
  type WatchNotice,
} from '@kvreuse/discovery';
import { messageOf } from '@kvreuse/errors';
import { InvalidInventoryOptionError, InventoryEventError, InventoryWithdrawnError } from './errors.js';
import { checkFunction, checkNonEmptyString, checkOptionalString, checkOptionsObject, checkStore } from './options.js';
import {
  checkEvents,
  encodeWireBatch,
  type InventoryEvent,
  safeParseInventoryBatch,
  toWireEvents,
  type WireEvent,
} from './events.js';
import { RetainedInventory } from './retained-inventory.js';

export const defaultInventoryPrefix = 'kvreuse/inventory/';

export interface InventoryPublisherOptions {
  /** A discovery key segment, as `claimIncarnationEpoch` takes it: 1 to 200 letters, digits and `._:@-`. */
  readonly workerId: string;
  /** A discovery key segment, as `claimIncarnationEpoch` takes it: 1 to 200 letters, digits and `._:@-`. */
  readonly incarnation: string;
  /** The incarnation's epoch (`claimIncarnationEpoch`, or `RankPublication.epoch`). */
  readonly epoch: number;
  /** The worker's lease: its inventory disappears with it. */
  readonly lease: LeaseId;
  /** The inventory's key prefix (default `kvreuse/inventory/`): not empty. */
  readonly prefix?: string;
  /** Where the worker's epoch fence lives: the rank parts' key prefix (default `kvreuse/`). */
  readonly keyPrefix?: string;
}

export interface InventoryPublishOptions {
  /** This batch completes the incarnation's inventory (it stays complete: later batches say so too). */
  readonly complete?: boolean;
}

/**
 * The worker id and incarnation name discovery keys (the epoch fence, the incarnation's claim): one that
 * cannot would have every `publish` refused, or its batches refused by every follower.
 */
function checkKeySegmentOption(option: string, field: 'workerId' | 'incarnation', value: unknown): void {
  try {
    checkKeySegment(field, value);
  } catch (error) {
    if (error instanceof RankPartPublicationError) throw new InvalidInventoryOptionError(option, value, error.reason);
    throw error;
  }
}

function checkInventoryPrefix(option: string, prefix: unknown): void {
  if (prefix !== undefined) checkNonEmptyString(option, prefix);
}

/**
 * Publishes one worker incarnation's inventory events, numbered in order, each batch fenced by the
 * incarnation's epoch, until withdrawn. Batches are written one at a time, in the order `publish` was
 * called: each write starts once the previous one settled, so the worker's key always ends with its
 * latest batch. Once a newer incarnation has superseded it, `publish` writes nothing and throws
 * `SupersededError`, then and on every later call.
 */
export class InventoryPublisher {
  private seq = 0;
  private completed = false;
  /** Writes that failed (not superseded): a completeness claim made before one of them settled is void. */
  private failedWrites = 0;
  private withdrawn = false;
  private supersededBy: SupersededError | undefined;
  /** The last write queued, settled either way: the next one starts after it. */
  private writes: Promise<unknown> = Promise.resolve();
  readonly key: string;
  private readonly options: InventoryPublisherOptions;

  constructor(
    private readonly store: DiscoveryStore,
    options: InventoryPublisherOptions,
  ) {
    checkStore('store', store);
    checkOptionsObject('options', options);
    const { workerId, incarnation, epoch, lease, prefix, keyPrefix } = options;
    checkKeySegmentOption('options.workerId', 'workerId', workerId);
    checkKeySegmentOption('options.incarnation', 'incarnation', incarnation);
    checkNonEmptyString('options.lease', lease);
    checkInventoryPrefix('options.prefix', prefix);
    checkOptionalString('options.keyPrefix', keyPrefix);
    if (!isEpoch(epoch)) {
      throw new InventoryEventError(
        'epoch',
        epoch,
        'an epoch is a whole number ≥ 1, as claimIncarnationEpoch hands it out',
      );
    }
    this.options = Object.freeze({
      workerId,
      incarnation,
      epoch,
      lease,
      ...(keyPrefix === undefined ? {} : { keyPrefix }),
    });
    this.key = `${prefix ?? defaultInventoryPrefix}${workerId}`;
  }

  /** Why the publisher stopped for good, once a newer incarnation superseded it; otherwise undefined. */
  get superseded(): SupersededError | undefined {
    return this.supersededBy;
  }

  /**
   * Whether the batches written say this incarnation's inventory is complete: true once a batch of
   * `publish(events, { complete: true })` was written (not while it is being written, nor if its write failed).
   */
  get complete(): boolean {
    return this.completed;
  }

  /**
   * Writes the events as the worker's next batch, once the batches published before it are written;
   * returns the discovery revision. The events are read at the call. Refused once withdrawn or superseded.
   *
   * With `complete: true` — once the worker has announced everything it retained when it (re)joined —
   * the batch and every later one say the incarnation's inventory is complete, and routers stop treating
   * it as warming. Until a batch saying so is written, a failed write leaves the inventory incomplete:
   * a batch whose `complete: true` was given before an earlier batch's write failed does not say it
   * (its events counted on that batch's), and neither do later ones, until a `publish` with
   * `complete: true` made after the failure — once the lost events are announced again — is written.
   */
  publish(events: readonly InventoryEvent[], options: InventoryPublishOptions = {}): Promise<number> {
    const { workerId, incarnation } = this.options;
    if (
      options === null ||
      typeof options !== 'object' ||
      (options.complete !== undefined && typeof options.complete !== 'boolean')
    ) {
      return Promise.reject(
        new InvalidInventoryOptionError('options.complete', options?.complete, 'options are { complete?: boolean }'),
      );
    }
    // What a follower would refuse is refused here, before it replaces the worker's last batch.
    try {
      checkEvents('events', events);
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.withdrawn) return Promise.reject(new InventoryWithdrawnError(workerId, incarnation));
    if (this.supersededBy !== undefined) return Promise.reject(this.supersededBy);
    const wireEvents = toWireEvents(events);
    const claim = options.complete === true ? { failedWritesSeen: this.failedWrites } : undefined;
    const write = this.writes.then(() => this.write(wireEvents, claim));
    this.writes = write.catch(() => undefined);
    return write;
  }

  /** Writes one batch, after every earlier one settled. */
  private async write(
    events: readonly WireEvent[],
    claim: { readonly failedWritesSeen: number } | undefined,
  ): Promise<number> {
    if (this.supersededBy !== undefined) throw this.supersededBy;
    const { workerId, incarnation, epoch, lease, keyPrefix } = this.options;
    const complete = this.completed || claim?.failedWritesSeen === this.failedWrites;
    // A failed write's seq is not used again: the write may have reached the store all the same (a
    // timeout), and a follower that saw it would ignore a later batch of the same seq.
    const value = encodeWireBatch(
      { workerId, incarnation, epoch, seq: this.seq++, ...(complete ? { complete: true } : {}) },
      events,
    );
    try {
      const revision = await commitFenced(
        this.store,
        { workerId, incarnation, epoch },
        [{ type: 'put', key: this.key, value, lease }],
        'publishing an inventory batch',
        keyPrefix === undefined ? {} : { keyPrefix },
      );
      if (complete) this.completed = true;
      return revision;
    } catch (error) {
      if (error instanceof SupersededError) this.supersededBy = error;
      else this.failedWrites++;
      throw error;
    }
  }

  /**
   * Stops publishing and deletes the worker's inventory key if it still holds this incarnation's
   * batch (a newer incarnation's is left alone, even one written while this runs: the delete is
   * conditional on the key being as read): followers forget the worker, and routers stop choosing
   * it as a source. Waits for every batch published before it to be written (or to fail) first, so that
   * nothing re-creates the key afterwards. Resolves whether a batch was deleted; a later `publish()` is refused.
   */
  async withdraw(): Promise<boolean> {
    this.withdrawn = true;
    await this.writes;
    const entry = await this.store.get(this.key);
    if (entry === undefined) return false;
    const stored = safeParseInventoryBatch(entry.value);
    if (!stored.success || stored.data.incarnation !== this.options.incarnation) return false;
    try {
      await this.store.commit([{ type: 'delete', key: this.key }], {
        compare: [{ key: this.key, modRevision: entry.modRevision }],
      });
      return true;
    } catch (error) {
      if (error instanceof DiscoveryCompareError) return false;
      throw error;
    }
  }
}

/**
 * The follower's callbacks. One that throws is reported as a process warning (`inventory: options.onComplete
 * of followInventory threw: …`); the follower goes on with the rest of the notice.
 */
export interface InventoryFollowerOptions {
  /** The inventory's key prefix (default `kvreuse/inventory/`): not empty, which would follow every key of the store. */
  readonly prefix?: string;
  /** A batch that failed validation (it is not applied). */
  readonly onRejected?: (key: string, error: InventoryEventError) => void;
  /**
   * A worker incarnation's inventory became complete in the followed inventory (`completeEpoch`): once
   * per incarnation, from the batch that first says so (or the first one a late follower sees).
   */
  readonly onComplete?: (worker: {
    readonly workerId: string;
    readonly incarnation: string;
    readonly epoch: number;
  }) => void;
  /** Outage and restored notices of the underlying watch, for the layers that act on them. */
  readonly onStatus?: (notice: Extract<WatchNotice, { type: 'outage' | 'restored' }>) => void;
}

export interface InventoryFollower {
  readonly watch: DiscoveryWatch;
  /**
   * Stops following. From the call on, also when a callback makes it in the middle of a notice, no
   * further change is applied to the inventory and no callback is called.
   */
  close(): Promise<void>;
}

type FollowerCallback = 'onRejected' | 'onComplete' | 'onStatus';

/** Calls a follower's callback; one that throws is reported as a process warning, and the follower goes on. */
function callFollowerBack<Name extends FollowerCallback>(
  options: InventoryFollowerOptions,
  name: Name,
  ...args: Parameters<NonNullable<InventoryFollowerOptions[Name]>>
): void {
  try {
    (options[name] as ((...values: typeof args) => void) | undefined)?.(...args);
  } catch (error) {
    process.emitWarning(`inventory: options.${name} of followInventory threw: ${messageOf(error)}`);
  }
}

/** Loads every worker's latest batch into the inventory, then follows changes until closed. */
export async function followInventory(
  store: DiscoveryStore,
  inventory: RetainedInventory,
  options: InventoryFollowerOptions = {},
): Promise<InventoryFollower> {
  checkStore('store', store);
  if (!(inventory instanceof RetainedInventory))
    throw new InvalidInventoryOptionError('inventory', inventory, 'must be a RetainedInventory');
  checkOptionsObject('options', options);
  checkInventoryPrefix('options.prefix', options.prefix);
  for (const callback of ['onRejected', 'onComplete', 'onStatus'] as const)
    if (options[callback] !== undefined) checkFunction(`options.${callback}`, options[callback]);
  const prefix = options.prefix ?? defaultInventoryPrefix;
  let closed = false;
  const applyEntry = (entry: DiscoveryEntry) => {
    if (closed) return;
    const parsed = safeParseInventoryBatch(entry.value);
    if (!parsed.success) return callFollowerBack(options, 'onRejected', entry.key, parsed.error);
    const expectedWorker = entry.key.slice(prefix.length);
    if (parsed.data.workerId !== expectedWorker) {
      return callFollowerBack(
        options,
        'onRejected',
        entry.key,
        new InventoryEventError(
          'workerId',
          parsed.data.workerId,
          `the batch is published under worker ${expectedWorker}`,
        ),
      );
    }
    const { workerId, incarnation, epoch } = parsed.data;
    const wasComplete = inventory.completeEpoch(workerId) === epoch;
    try {
      inventory.apply(parsed.data);
    } catch (error) {
      // A batch that claims another incarnation's epoch: refused like any bad batch, never thrown into the watch.
      if (!(error instanceof InventoryEventError)) throw error;
      return callFollowerBack(options, 'onRejected', entry.key, error);
    }
    if (!wasComplete && inventory.completeEpoch(workerId) === epoch)
      callFollowerBack(options, 'onComplete', { workerId, incarnation, epoch });
  };
  const replaceWith = (entries: readonly DiscoveryEntry[]) => {
    const present = new Set(entries.map((entry) => entry.key.slice(prefix.length)));
    for (const workerId of inventory.workers()) if (!present.has(workerId)) inventory.removeWorker(workerId);
    entries.forEach(applyEntry);
  };

  const snapshot = await store.list(prefix);
  replaceWith(snapshot.entries);
  const watch = await store.watch(
    prefix,
    (notice) => {
      if (closed) return;
      switch (notice.type) {
        case 'changes':
          for (const event of notice.events) {
            if (event.type === 'put') applyEntry(event.entry);
            else if (!closed) inventory.removeWorker(event.key.slice(prefix.length));
          }
          return;
        case 'resync':
          replaceWith(notice.snapshot.entries);
          return;
        default:
          callFollowerBack(options, 'onStatus', notice);
      }
    },
    { fromRevision: snapshot.revision + 1 },
  );
  return {
    watch,
    close: () => {
      closed = true;
      return watch.close();
    },
  };
}
