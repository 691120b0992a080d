// Records what a watcher is told and waits (event-driven, with a generous guard) for a condition.
import type { DiscoveryStore, DiscoveryWatch, WatchNotice, WatchOptions } from '../src/index.js';

export interface WatchRecorder {
  readonly notices: WatchNotice[];
  readonly watch: DiscoveryWatch;
  until(what: string, done: (notices: readonly WatchNotice[]) => boolean, guardMs?: number): Promise<void>;
}

export async function recordWatch(store: DiscoveryStore, prefix: string, options?: WatchOptions): Promise<WatchRecorder> {
  const notices: WatchNotice[] = [];
  let wake: () => void = () => {};
  const watch = await store.watch(
    prefix,
    (notice) => {
      notices.push(notice);
      wake();
    },
    options,
  );
  return {
    notices,
    watch,
    async until(what, done, guardMs = 30_000) {
      const giveUpAt = Date.now() + guardMs;
      while (!done(notices)) {
        if (Date.now() > giveUpAt) {
          throw new Error(`watch of ${prefix}: no ${what}; notices so far: ${JSON.stringify(notices.map(describeNotice))}`);
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, 100);
        });
      }
    },
  };
}

export function describeNotice(notice: WatchNotice): string {
  switch (notice.type) {
    case 'changes':
      return `@${notice.revision} ${notice.events.map((e) => (e.type === 'put' ? `put ${e.entry.key}` : `delete ${e.key}`)).join(', ')}`;
    case 'resync':
      return `resync @${notice.snapshot.revision} (${notice.snapshot.entries.length} keys)`;
    default:
      return notice.type;
  }
}

/** The keys each `changes` notice touched, as `put key` / `delete key`. */
export function changeLog(notices: readonly WatchNotice[]): string[] {
  return notices.flatMap((notice) =>
    notice.type === 'changes'
      ? notice.events.map((e) => (e.type === 'put' ? `put ${e.entry.key}` : `delete ${e.key}`))
      : [],
  );
}
