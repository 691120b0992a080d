// Watch delivery for the backends that keep their own history (memory, sqlite): one registry of
// watchers per store, fed with the batches of changes the store read or made, in revision order.
import { notifyListener } from './common.js';
import type { DiscoveryEvent, DiscoverySnapshot, DiscoveryWatch, WatchListener, WatchNotice } from './types.js';

/** All changes of one revision, for every key. */
export interface ChangeBatch {
  readonly revision: number;
  readonly events: readonly DiscoveryEvent[];
}

export interface LocalHistory {
  currentRevision(): number;
  /** Every batch with revision ≥ `fromRevision`, or undefined if part of that history is gone. */
  batchesFrom(fromRevision: number): readonly ChangeBatch[] | undefined;
  snapshot(prefix: string): DiscoverySnapshot;
}

const eventKey = (event: DiscoveryEvent): string => (event.type === 'put' ? event.entry.key : event.key);

class LocalWatch implements DiscoveryWatch {
  revision: number;
  closed = false;

  constructor(
    readonly prefix: string,
    private readonly listener: WatchListener,
    startRevision: number,
    private readonly onClose: (watch: LocalWatch) => void,
  ) {
    this.revision = startRevision - 1;
  }

  deliver(batch: ChangeBatch): void {
    if (this.closed || batch.revision <= this.revision) return;
    this.revision = batch.revision;
    const events = batch.events.filter((event) => eventKey(event).startsWith(this.prefix));
    if (events.length > 0) this.notify({ type: 'changes', revision: batch.revision, events });
  }

  resync(reason: string, snapshot: DiscoverySnapshot): void {
    if (this.closed) return;
    this.revision = snapshot.revision;
    this.notify({ type: 'resync', reason, snapshot });
  }

  tell(notice: WatchNotice): void {
    if (!this.closed) this.notify(notice);
  }

  private notify(notice: WatchNotice): void {
    notifyListener(this.listener, notice);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.onClose(this);
  }
}

export class LocalWatchHub {
  private readonly watches = new Set<LocalWatch>();

  constructor(private readonly history: LocalHistory) {}

  get size(): number {
    return this.watches.size;
  }

  /** Registers a watcher and queues the history it asked for (or a resync if that history is gone). */
  add(prefix: string, listener: WatchListener, fromRevision: number | undefined): DiscoveryWatch {
    const current = this.history.currentRevision();
    const watch = new LocalWatch(prefix, listener, fromRevision ?? current + 1, (w) => this.watches.delete(w));
    this.watches.add(watch);
    if (fromRevision !== undefined && fromRevision <= current) {
      const backlog = this.history.batchesFrom(fromRevision);
      const snapshot = backlog === undefined ? this.history.snapshot(prefix) : undefined;
      queueMicrotask(() => {
        if (snapshot !== undefined) watch.resync(`revision ${fromRevision} is no longer in the history`, snapshot);
        else for (const batch of backlog ?? []) watch.deliver(batch);
      });
    }
    return watch;
  }

  /** Delivers new batches to every watcher, after the current call stack. */
  publish(batches: readonly ChangeBatch[]): void {
    if (batches.length === 0 || this.watches.size === 0) return;
    const watches = [...this.watches];
    queueMicrotask(() => {
      for (const batch of batches) for (const watch of watches) watch.deliver(batch);
    });
  }

  /** Tells every watcher its history is gone and hands it the current state under its prefix. */
  resyncAll(reason: string): void {
    for (const watch of this.watches) {
      const snapshot = this.history.snapshot(watch.prefix);
      queueMicrotask(() => watch.resync(reason, snapshot));
    }
  }

  /**
   * Tells every watcher something about the store itself (an outage, or that it is back), after
   * the batches and resyncs queued before it: `restored` never overtakes what was missed.
   */
  broadcast(notice: Extract<WatchNotice, { type: 'outage' | 'restored' }>): void {
    const watches = [...this.watches];
    queueMicrotask(() => {
      for (const watch of watches) watch.tell(notice);
    });
  }

  closeAll(): void {
    for (const watch of this.watches) watch.closed = true;
    this.watches.clear();
  }
}
