// Records what a watcher is told and waits (event-driven, with a generous guard) for a condition.
import type { DiscoveryStore, DiscoveryWatch, WatchNotice, WatchOptions } from '../src/index.js';

export interface WatchRecorder {
  readonly notices: WatchNotice[];
  readonly watch: DiscoveryWatch;
  until(what: string, done: (notices: readonly WatchNotice[]) => boolean, guardMs?: number): Promise<void>;
}

export async function recordWatch(
  store: DiscoveryStore,
  prefix: string,
  options?: WatchOptions,
): Promise<WatchRecorder> {
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
          throw new Error(
            `watch of ${prefix}: no ${what}; notices so far: ${JSON.stringify(notices.map(describeNotice))}`,
          );
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

/** What a listener knows after applying `notices` in order: key → value text, sorted by key. */
export function viewOf(notices: readonly WatchNotice[]): Map<string, string> {
  const view = new Map<string, string>();
  for (const notice of notices) {
    if (notice.type === 'resync') {
      view.clear();
      for (const entry of notice.snapshot.entries) view.set(entry.key, Buffer.from(entry.value).toString());
    }
    if (notice.type !== 'changes') continue;
    for (const event of notice.events) {
      if (event.type === 'put') view.set(event.entry.key, Buffer.from(event.entry.value).toString());
      else view.delete(event.key);
    }
  }
  return new Map([...view].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
