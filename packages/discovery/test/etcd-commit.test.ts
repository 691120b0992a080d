// A commit that replaces several prefixes on etcd reads them concurrently, each at its own
// revision. A key another client writes under one prefix after that prefix was read, but before a
// later read of another prefix, must make the commit re-read; it must never survive the delete.
import { expect, test, vi } from 'vitest';
import { connectEtcdDiscovery, type DiscoverySnapshot } from '../src/index.js';
import { useEtcdStore } from './etcd-store.js';
import { etcdRuns } from '@kvreuse-internal/test-support';

vi.setConfig({ testTimeout: 60_000 });

const etcd = useEtcdStore();

test.skipIf(!etcdRuns).each([
  { late: 'first', early: 'second' },
  { late: 'second', early: 'first' },
])(
  'a key written under the $late prefix after its read, before the $early prefix is read, is deleted too',
  async ({ late, early }) => {
    const root = `/multi-${late}/`;
    const latePrefix = `${root}${late}/`;
    const earlyPrefix = `${root}${early}/`;
    const store = etcd.store;
    const other = connectEtcdDiscovery({ hosts: etcd.server.url });
    await store.put(`${root}first/old`, '1');
    await store.put(`${root}second/old`, '2');

    // Force the order: read the late prefix, then the other client writes under it, then read the other prefix.
    const list = store.list.bind(store);
    let lateRead!: () => void;
    const lateReadDone = new Promise<void>((resolve) => (lateRead = resolve));
    let written: number | undefined;
    const reads: DiscoverySnapshot[] = [];
    const spy = vi.spyOn(store, 'list').mockImplementation(async (prefix) => {
      if (prefix === earlyPrefix && written === undefined) {
        await lateReadDone;
        written = await other.put(`${latePrefix}late`, 'written between the reads');
      }
      const snapshot = await list(prefix);
      reads.push(snapshot);
      if (prefix === latePrefix) lateRead();
      return snapshot;
    });
    try {
      await store.commit([
        { type: 'deletePrefix', prefix: `${root}first/` },
        { type: 'deletePrefix', prefix: `${root}second/` },
        { type: 'put', key: `${root}second/new`, value: '3' },
      ]);
    } finally {
      spy.mockRestore();
      await other.close();
    }
    // The two first reads straddle the other client's write; the commit had to read again.
    expect(reads[0]!.revision).toBeLessThan(written!);
    expect(reads[1]!.revision).toBeGreaterThanOrEqual(written!);
    expect(reads).toHaveLength(4);
    expect((await store.list(root)).entries.map((entry) => entry.key)).toEqual([`${root}second/new`]);
  },
);

test.skipIf(!etcdRuns)(
  'a commit whose prefix another writer changes after every read fails naming it as a prefix, and writes nothing',
  async () => {
    const store = connectEtcdDiscovery({ hosts: etcd.server.url, commitAttempts: 2 });
    const other = connectEtcdDiscovery({ hosts: etcd.server.url });
    await store.put('/contended/old', '1');
    // After each read of the prefix, before the commit's transaction, the other client writes under it.
    const list = store.list.bind(store);
    let writes = 0;
    const spy = vi.spyOn(store, 'list').mockImplementation(async (prefix) => {
      const snapshot = await list(prefix);
      await other.put(`/contended/write-${++writes}`, 'between the read and the commit');
      return snapshot;
    });
    try {
      await expect(
        store.commit([
          { type: 'deletePrefix', prefix: '/contended/' },
          { type: 'put', key: '/contended/new', value: '2' },
        ]),
      ).rejects.toMatchObject({
        code: 'DISCOVERY_UNAVAILABLE',
        key: undefined,
        message:
          'etcd discovery: commit failed: another writer changed what it deletes under prefix "/contended/" during each of its 2 attempts',
      });
      spy.mockRestore();
      expect(writes).toBe(2);
      expect((await store.list('/contended/')).entries.map((entry) => entry.key)).toEqual([
        '/contended/old',
        '/contended/write-1',
        '/contended/write-2',
      ]);
    } finally {
      await Promise.all([store.close(), other.close()]);
    }
  },
);

if (!etcdRuns) test.skip('etcd commit: etcd is not installed (in CI this fails instead)', () => {});
