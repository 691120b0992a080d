import { expect, test } from 'vitest';
import { DiscoveryUnavailableError } from './errors.js';
import { type ChangeBatch, LocalWatchHub } from './local-watch.js';
import type { WatchNotice } from './types.js';

const entry = (key: string, revision: number) => ({
  key,
  value: new TextEncoder().encode('v'),
  createRevision: revision,
  modRevision: revision,
  lease: undefined,
});

function hubAt(revision: number): LocalWatchHub {
  return new LocalWatchHub({
    currentRevision: () => revision,
    batchesFrom: () => [],
    snapshot: () => ({ entries: [entry('/p/a', revision)], revision }),
  });
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

test('restored reaches a watcher after the changes it missed, though it was broadcast in the same turn', async () => {
  const hub = hubAt(4);
  const notices: WatchNotice[] = [];
  hub.add('/p/', (notice) => notices.push(notice), undefined);
  hub.broadcast({ type: 'outage', error: new DiscoveryUnavailableError('sqlite', 'watch poll', undefined) });
  await flush();
  const missed: ChangeBatch = { revision: 5, events: [{ type: 'put', entry: entry('/p/b', 5) }] };
  hub.publish([missed]);
  hub.broadcast({ type: 'restored' });
  await flush();
  expect(notices.map((notice) => notice.type)).toEqual(['outage', 'changes', 'restored']);
});

test('restored reaches a watcher after the resync that replaced what it missed', async () => {
  const hub = hubAt(7);
  const notices: WatchNotice[] = [];
  hub.add('/p/', (notice) => notices.push(notice), undefined);
  hub.resyncAll('the history moved past this watcher');
  hub.broadcast({ type: 'restored' });
  await flush();
  expect(notices.map((notice) => notice.type)).toEqual(['resync', 'restored']);
});
