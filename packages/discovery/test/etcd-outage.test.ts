// Cut a live watch off from etcd: kill the server, or kill a gRPC proxy between the watcher and
// etcd while a second client, connected directly, changes the store behind the watcher. The
// watcher is told once, gets the state it missed before `restored`, and never sees a state the
// store did not have. close() ends while etcd is frozen.
import { expect, test, vi } from 'vitest';
import {
  connectEtcdDiscovery,
  DiscoveryClosedError,
  type DiscoveryStore,
  DiscoveryUnavailableError,
  type EtcdDiscoveryStore,
} from '../src/index.js';
import { useEtcdStore } from './etcd-store.js';
import { EtcdProxy, etcdRuns, threadStates } from '@kvreuse-internal/test-support';
import { changeLog, describeNotice, recordWatch, viewOf } from './watch-recorder.js';

vi.setConfig({ testTimeout: 90_000 });

const etcd = useEtcdStore();
const options = { requestTimeoutMs: 2_000, maxReconnectDelayMs: 500 };

test.skipIf(!etcdRuns)(
  'a watch reports the outage, resyncs and says restored after a restart, then follows every change',
  async () => {
    const recorder = await recordWatch(etcd.store, '/outage/');
    await etcd.store.put('/outage/before', '1');
    await recorder.until('the first put', (n) => changeLog(n).length === 1);

    await etcd.server.kill();
    await recorder.until('an outage notice', (n) => n.some((notice) => notice.type === 'outage'));
    const outage = recorder.notices.find((notice) => notice.type === 'outage');
    expect(outage?.type === 'outage' && outage.error).toBeInstanceOf(DiscoveryUnavailableError);
    expect(outage?.type === 'outage' && outage.error).toMatchObject({
      backend: 'etcd',
      operation: 'watch',
      key: '/outage/',
    });
    // In words: which endpoint, and how it was lost; gRPC's own failure is the cause.
    expect(outage?.type === 'outage' && outage.error.message).toBe(
      `etcd discovery: watch of prefix "/outage/" failed: the connection to etcd at ${etcd.server.url} dropped`,
    );
    expect(outage?.type === 'outage' && outage.error.cause).toMatchObject({
      message: expect.stringMatching(/^14 UNAVAILABLE: /),
    });
    // Requests fail with a typed error while etcd is down.
    await expect(etcd.store.put('/outage/during', 'x')).rejects.toMatchObject({
      code: 'DISCOVERY_UNAVAILABLE',
      key: '/outage/during',
    });

    await etcd.server.restart();
    await recorder.until('the restored notice', (n) => n.some((notice) => notice.type === 'restored'));
    const writer = connectEtcdDiscovery({ hosts: etcd.server.url });
    await writer.put('/outage/after-1', '2');
    await writer.commit([
      { type: 'deletePrefix', prefix: '/outage/before' },
      { type: 'put', key: '/outage/after-2', value: '3' },
    ]);
    await writer.close();
    await recorder.until('the changes after the restart', (n) => changeLog(n).length === 4);
    await recorder.watch.close();

    expect(recorder.notices.map((n) => n.type)).toEqual([
      'changes',
      'outage',
      'resync',
      'restored',
      'changes',
      'changes',
    ]);
    const resync = recorder.notices[2];
    expect(resync?.type === 'resync' && resync.snapshot.entries.map((e) => e.key)).toEqual(['/outage/before']);
    expect(resync?.type === 'resync' && resync.reason).toBe(
      `the watch was cut off: the connection to etcd at ${etcd.server.url} dropped; ` +
        'this is the state when it was re-established',
    );
    expect(changeLog(recorder.notices)).toEqual([
      'put /outage/before',
      'put /outage/after-1',
      'delete /outage/before',
      'put /outage/after-2',
    ]);
    expect([...viewOf(recorder.notices).keys()]).toEqual(['/outage/after-1', '/outage/after-2']);
  },
);

/** The writer's changes, with the whole state under `prefix` after each of them, by revision. */
class StateLog {
  readonly states = new Map<number, [string, string][]>();

  constructor(
    private readonly writer: DiscoveryStore,
    private readonly prefix: string,
  ) {}

  /** Runs one write (nothing else writes meanwhile) and records the state it left. */
  async write(change: (store: DiscoveryStore) => Promise<unknown>): Promise<number> {
    await change(this.writer);
    const snapshot = await this.writer.list(this.prefix);
    this.states.set(
      snapshot.revision,
      snapshot.entries.map((e) => [e.key, Buffer.from(e.value).toString()]),
    );
    return snapshot.revision;
  }
}

test.skipIf(!etcdRuns)(
  'changes and a compaction made while the watcher is cut off reach it as one resync, before restored',
  async () => {
    const proxy = await EtcdProxy.start(etcd.server);
    const watcher = connectEtcdDiscovery({ ...options, hosts: proxy.url });
    try {
      const log = new StateLog(etcd.store, '/cut/');
      const recorder = await recordWatch(watcher, '/cut/');
      await log.write((s) => s.put('/cut/a', 'a1'));
      await log.write((s) => s.put('/cut/b', 'b1'));
      await recorder.until('the first puts', (n) => changeLog(n).length === 2);

      await proxy.kill();
      await recorder.until('an outage notice', (n) => n.some((notice) => notice.type === 'outage'));
      // Behind the watcher: a delete, a new key, an overwrite, a key that comes and goes, a compaction.
      await log.write((s) => s.delete('/cut/a'));
      await log.write((s) => s.put('/cut/c', 'c1'));
      await log.write((s) => s.put('/cut/b', 'b2'));
      await log.write((s) => s.put('/cut/z', 'z1'));
      const behind = await log.write((s) => s.delete('/cut/z'));
      await etcd.store.compact(behind);

      await proxy.restart();
      await recorder.until('the restored notice', (n) => n.some((notice) => notice.type === 'restored'));
      const after = await log.write((s) => s.put('/cut/d', 'd1'));
      await recorder.until('a change after the restore', (n) =>
        n.some((notice) => notice.type === 'changes' && notice.revision === after),
      );
      await recorder.watch.close();

      expect(recorder.notices.map((n) => n.type)).toEqual([
        'changes',
        'changes',
        'outage',
        'resync',
        'restored',
        'changes',
      ]);
      const resync = recorder.notices[3];
      expect(resync?.type === 'resync' && resync.snapshot.revision).toBe(behind);
      // After every notice that states something, the watcher's view is the store's state at that revision.
      recorder.notices.forEach((notice, i) => {
        const revision =
          notice.type === 'changes' ? notice.revision : notice.type === 'resync' ? notice.snapshot.revision : undefined;
        if (revision === undefined) return;
        expect([...viewOf(recorder.notices.slice(0, i + 1))], `after ${describeNotice(notice)}`).toEqual(
          log.states.get(revision),
        );
      });
      expect([...viewOf(recorder.notices)]).toEqual([
        ['/cut/b', 'b2'],
        ['/cut/c', 'c1'],
        ['/cut/d', 'd1'],
      ]);
    } finally {
      await watcher.close();
      await proxy.stop();
    }
  },
);

test.skipIf(!etcdRuns)(
  'close() ends while etcd is frozen, with a live watch and a watch still starting; closing again is a no-op',
  async () => {
    const store: EtcdDiscoveryStore = connectEtcdDiscovery({ ...options, hosts: etcd.server.url });
    const recorder = await recordWatch(store, '/frozen/');
    await etcd.store.put('/frozen/a', '1');
    await recorder.until('the put', (n) => changeLog(n).length === 1);

    await etcd.server.pause();
    try {
      const starting = store.watch('/frozen/', () => {}, { fromRevision: 1 });
      await store.close();
      await expect(starting).rejects.toBeInstanceOf(DiscoveryClosedError);
      await store.close();
      await recorder.watch.close();
      await expect(store.get('/frozen/a')).rejects.toBeInstanceOf(DiscoveryClosedError);
    } finally {
      etcd.server.resume();
    }
    expect(recorder.notices.map((n) => n.type)).toEqual(['changes']);
    expect(await etcd.store.get('/frozen/a')).toBeDefined();
  },
);

test.skipIf(!etcdRuns)('a watch that a frozen etcd never confirms is refused with a typed error', async () => {
  const store = connectEtcdDiscovery({ ...options, hosts: etcd.server.url });
  await etcd.server.pause();
  try {
    // Not one thread of etcd is left to answer (kill() alone returns before they have all stopped).
    expect(new Set(threadStates(etcd.server.pid!))).toEqual(new Set(['T']));
    await expect(store.watch('/unconfirmed/', () => {}, { fromRevision: 1 })).rejects.toMatchObject({
      code: 'DISCOVERY_UNAVAILABLE',
      key: '/unconfirmed/',
      message: `etcd discovery: watch of prefix "/unconfirmed/" failed: etcd at ${etcd.server.url} did not confirm the watch within 2000 ms`,
    });
  } finally {
    etcd.server.resume();
    await store.close();
  }
});

test.skipIf(!etcdRuns)(
  'a watch whose etcd freezes is told the outage in words, then resyncs and is restored once etcd answers',
  async () => {
    const store = connectEtcdDiscovery({ ...options, hosts: etcd.server.url });
    try {
      const recorder = await recordWatch(store, '/frozen-watch/');
      await etcd.server.pause();
      try {
        await recorder.until('an outage notice', (n) => n.some((notice) => notice.type === 'outage'));
      } finally {
        etcd.server.resume();
      }
      await recorder.until('the restored notice', (n) => n.some((notice) => notice.type === 'restored'));
      await recorder.watch.close();

      const why = `etcd at ${etcd.server.url} did not answer the watch within 4000 ms`;
      expect(recorder.notices.map((n) => n.type)).toEqual(['outage', 'resync', 'restored']);
      const [outage, resync] = recorder.notices;
      expect(outage?.type === 'outage' && outage.error.message).toBe(
        `etcd discovery: watch of prefix "/frozen-watch/" failed: ${why}`,
      );
      expect(resync?.type === 'resync' && resync.reason).toBe(
        `the watch was cut off: ${why}; this is the state when it was re-established`,
      );
    } finally {
      await store.close();
    }
  },
);

test.skipIf(!etcdRuns)('a request whose connection to etcd dropped says so in words', async () => {
  const store = connectEtcdDiscovery({ ...options, hosts: etcd.server.url });
  try {
    await store.get('/dropped/a');
    // Frozen, etcd holds the request unanswered until it is killed.
    await etcd.server.pause();
    const failure = store.get('/dropped/a').then(
      () => undefined,
      (error: unknown) => error,
    );
    await etcd.server.kill();
    expect(await failure).toMatchObject({
      code: 'DISCOVERY_UNAVAILABLE',
      message: `etcd discovery: get of key "/dropped/a" failed: the connection to etcd at ${etcd.server.url} dropped`,
      cause: { message: expect.stringMatching(/^14 UNAVAILABLE: /) },
    });
  } finally {
    await etcd.server.restart();
    await store.close();
  }
});

if (!etcdRuns) test.skip('etcd outage: etcd is not installed (in CI this fails instead)', () => {});
