// One contract, three real backends: memory, sqlite (a real file) and etcd (a real server).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import {
  claimIncarnationEpoch,
  commitFenced,
  connectEtcdDiscovery,
  DiscoveryArgumentError,
  DiscoveryClosedError,
  DiscoveryCompareError,
  DiscoveryKeyError,
  DiscoveryLeaseError,
  type DiscoveryStore,
  DiscoveryValueError,
  entryText,
  MemoryDiscoveryStore,
  openSqliteDiscovery,
  readWorkerEpoch,
  SupersededError,
} from '../src/index.js';
import { etcdBinary, etcdRequired, EtcdServer, ManualClock } from '@kvreuse-internal/test-support';
import { changeLog, recordWatch } from './watch-recorder.js';

// etcd's leases live at least ~2 s; these are guards, not assertions on speed.
vi.setConfig({ testTimeout: 60_000 });

interface Backend {
  readonly name: string;
  /** A TTL the backend honours as given (etcd's minimum TTL is about 2 s). */
  readonly shortTtlMs: number;
  setup(): Promise<void>;
  open(): DiscoveryStore;
  /**
   * Lets `ms` of lease time pass. Memory and SQLite run on a manual clock: it moves, then the
   * store is touched so that it expires what the clock passed. etcd keeps its own time: real time passes.
   */
  elapse(store: DiscoveryStore, ms: number): Promise<void>;
  teardown(): Promise<void>;
}

const localClock = new ManualClock();
async function advanceLocalClock(store: DiscoveryStore, ms: number): Promise<void> {
  localClock.advance(ms);
  await store.get('/kvreuse-test/touch');
}

let tempDir = '';
let sqliteFiles = 0;
let etcd: EtcdServer | undefined;

const backends: Backend[] = [
  {
    name: 'memory',
    shortTtlMs: 300,
    setup: async () => {},
    open: () => new MemoryDiscoveryStore({ now: localClock.now }),
    elapse: advanceLocalClock,
    teardown: async () => {},
  },
  {
    name: 'sqlite',
    shortTtlMs: 300,
    setup: async () => {
      tempDir = mkdtempSync(join(tmpdir(), 'kvreuse-discovery-'));
    },
    open: () =>
      openSqliteDiscovery(join(tempDir, `store-${sqliteFiles++}.db`), {
        pollIntervalMs: 10,
        now: localClock.now,
        clockId: 'manual',
      }),
    elapse: advanceLocalClock,
    teardown: async () => rmSync(tempDir, { recursive: true, force: true }),
  },
];
if (etcdBinary !== undefined || etcdRequired) {
  backends.push({
    name: 'etcd',
    shortTtlMs: 2_000,
    setup: async () => {
      etcd = await EtcdServer.start();
    },
    open: () => connectEtcdDiscovery({ hosts: etcd!.url }),
    elapse: (_store, ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    teardown: async () => etcd?.stop(),
  });
} else {
  test.skip('etcd backend: etcd is not installed (in CI this fails instead)', () => {});
}

describe.each(backends)('$name discovery store', (backend) => {
  let store: DiscoveryStore;
  let prefixes = 0;
  // Every test works under its own prefix, so one etcd server serves the whole file.
  const fresh = () => `/kvreuse-test/${backend.name}/${prefixes++}/`;

  beforeAll(() => backend.setup(), 60_000);
  afterAll(() => backend.teardown());
  afterEach(async () => {
    await store?.close();
  });
  const open = () => {
    store = backend.open();
    return store;
  };

  test('puts, gets and lists strings and bytes, with revisions', async () => {
    const s = open();
    const p = fresh();
    const first = await s.put(`${p}b`, 'text value');
    const second = await s.put(`${p}a`, new Uint8Array([0, 255, 7]));
    expect(second).toBeGreaterThan(first);

    const text = await s.get(`${p}b`);
    expect(text).toMatchObject({ key: `${p}b`, createRevision: first, modRevision: first, lease: undefined });
    expect(entryText(text!)).toBe('text value');
    const bytes = await s.get(`${p}a`);
    expect([...bytes!.value]).toEqual([0, 255, 7]);
    expect(() => entryText(bytes!)).toThrow(DiscoveryValueError);

    const third = await s.put(`${p}b`, 'rewritten');
    expect(await s.get(`${p}b`)).toMatchObject({ createRevision: first, modRevision: third });

    await s.put(`${p.slice(0, -1)}-outside`, 'not under the prefix');
    const listed = await s.list(p);
    expect(listed.entries.map((entry) => entry.key)).toEqual([`${p}a`, `${p}b`]);
    expect(listed.revision).toBeGreaterThanOrEqual(third);
    expect(await s.get(`${p}missing`)).toBeUndefined();

    expect(await s.delete(`${p}a`)).toBe(true);
    expect(await s.delete(`${p}a`)).toBe(false);
    expect((await s.list(p)).entries.map((entry) => entry.key)).toEqual([`${p}b`]);
  });

  test('refuses bad keys, values, TTLs and leases with typed errors naming them', async () => {
    const s = open();
    const p = fresh();
    await expect(s.put('', 'x')).rejects.toMatchObject({
      code: 'DISCOVERY_INVALID_KEY',
      key: '',
      backend: backend.name,
    });
    await expect(s.get(42 as unknown as string)).rejects.toBeInstanceOf(DiscoveryKeyError);
    await expect(s.put(`${p}k`, 42 as unknown as string)).rejects.toMatchObject({
      code: 'DISCOVERY_INVALID_VALUE',
      key: `${p}k`,
      value: 42,
    });
    await expect(s.grantLease(-5)).rejects.toBeInstanceOf(DiscoveryArgumentError);
    await expect(s.put(`${p}k`, 'v', { lease: 'not-a-lease' })).rejects.toMatchObject({ argument: 'lease' });
    const error = await s.put(`${p}k`, 'v', { lease: '987654321' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DiscoveryLeaseError);
    expect(error).toMatchObject({ code: 'DISCOVERY_LEASE_NOT_FOUND', lease: '987654321', backend: backend.name });
    await expect(s.keepAlive('987654321')).rejects.toBeInstanceOf(DiscoveryLeaseError);
    await expect(s.commit([{ type: 'rename', key: `${p}k` } as never])).rejects.toMatchObject({
      code: 'DISCOVERY_INVALID_ARGUMENT',
      argument: 'operations[0]',
    });
    await expect(s.watch(p, () => {}, { fromRevision: 0 })).rejects.toMatchObject({ argument: 'fromRevision' });
    expect(await s.get(`${p}k`)).toBeUndefined();
  });

  test("refuses a lease TTL over etcd's maximum (9,000,000,000 s) as an argument, granting nothing", async () => {
    const s = open();
    const overMaximum = 9_000_000_000_001;
    await expect(s.grantLease(overMaximum)).rejects.toThrow(
      expect.objectContaining({
        code: 'DISCOVERY_INVALID_ARGUMENT',
        backend: backend.name,
        argument: 'ttlMs',
        value: overMaximum,
        message: expect.stringContaining('9000000000000'),
      }),
    );
    await expect(s.grantLease(Number.MAX_SAFE_INTEGER)).rejects.toMatchObject({ argument: 'ttlMs' });
    const longest = await s.grantLease(9_000_000_000_000);
    expect(longest.ttlMs).toBe(9_000_000_000_000);
    await s.revokeLease(longest.id);
  });

  test('a commit under a lease that does not exist names the lease and the key put under it, writing nothing', async () => {
    const s = open();
    const p = fresh();
    const held = await s.grantLease(60_000);
    const gone = await s.grantLease(60_000);
    await s.revokeLease(gone.id);
    const error = await s
      .commit([
        { type: 'put', key: `${p}held`, value: '1', lease: held.id },
        { type: 'put', key: `${p}unleased`, value: '2' },
        { type: 'put', key: `${p}gone`, value: '3', lease: gone.id },
      ])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DiscoveryLeaseError);
    expect(error).toMatchObject({ backend: backend.name, lease: gone.id, key: `${p}gone` });
    expect((error as Error).message).toContain(`${p}gone`);
    await expect(
      s.commit([
        { type: 'put', key: `${p}unleased`, value: '2' },
        { type: 'put', key: `${p}alone`, value: '4', lease: gone.id },
      ]),
    ).rejects.toMatchObject({ code: 'DISCOVERY_LEASE_NOT_FOUND', lease: gone.id, key: `${p}alone` });
    expect((await s.list(p)).entries).toEqual([]);
  });

  test('refuses a watch listener that is no function, and put or watch options that are no object', async () => {
    const s = open();
    const p = fresh();
    const refused = (argument: string, value: unknown) =>
      expect.objectContaining({ code: 'DISCOVERY_INVALID_ARGUMENT', backend: backend.name, argument, value });
    // Accepted, a listener that is no function threw an uncaught TypeError at the first change.
    await expect(s.watch(p, 42 as never)).rejects.toThrow(refused('listener', 42));
    await expect(s.watch(p, () => {}, null as never)).rejects.toThrow(refused('options', null));
    await expect(s.put(`${p}k`, 'v', null as never)).rejects.toThrow(refused('options', null));
    await expect(s.put(`${p}k`, 'v', 'lease-1' as never)).rejects.toThrow(refused('options', 'lease-1'));
    expect(await s.get(`${p}k`)).toBeUndefined();
  });

  test('a key under a lease disappears when the lease expires, and watchers see the delete', async () => {
    const s = open();
    const p = fresh();
    const lease = await s.grantLease(backend.shortTtlMs);
    expect(lease.ttlMs).toBeGreaterThanOrEqual(backend.shortTtlMs);
    const recorder = await recordWatch(s, p);
    await s.put(`${p}leased`, 'alive', { lease: lease.id });
    await s.put(`${p}kept`, 'no lease');
    expect((await s.get(`${p}leased`))?.lease).toBe(lease.id);
    await backend.elapse(s, lease.ttlMs);
    await recorder.until('delete on expiry', (n) => changeLog(n).includes(`delete ${p}leased`));
    expect(changeLog(recorder.notices)).toEqual([`put ${p}leased`, `put ${p}kept`, `delete ${p}leased`]);
    expect(await s.get(`${p}leased`)).toBeUndefined();
    expect(await s.get(`${p}kept`)).toBeDefined();
    await expect(s.keepAlive(lease.id)).rejects.toBeInstanceOf(DiscoveryLeaseError);
  });

  test('keep-alive renews a lease past its TTL', async () => {
    const s = open();
    const p = fresh();
    // Nine renewals half a short TTL apart outlive a lease of four short TTLs. On etcd, whose lease
    // time is real, each renewal may come up to three and a half short TTLs late (a loaded machine)
    // before the lease would lapse; memory and SQLite run on a manual clock, so lateness cannot matter.
    const ttlMs = backend.shortTtlMs * 4;
    const lease = await s.grantLease(ttlMs);
    await s.put(`${p}renewed`, 'v', { lease: lease.id });
    for (let i = 0; i < 9; i++) {
      await backend.elapse(s, backend.shortTtlMs / 2);
      await s.keepAlive(lease.id);
    }
    expect(await s.get(`${p}renewed`)).toBeDefined();
  });

  test('revoking a lease deletes its keys in one revision; revoking again is harmless', async () => {
    const s = open();
    const p = fresh();
    const lease = await s.grantLease(60_000);
    await s.put(`${p}x`, '1', { lease: lease.id });
    await s.put(`${p}y`, '2', { lease: lease.id });
    const recorder = await recordWatch(s, p);
    await s.revokeLease(lease.id);
    await s.revokeLease(lease.id);
    await recorder.until('the deletes', (n) => changeLog(n).length === 2);
    expect(recorder.notices).toHaveLength(1);
    expect(changeLog(recorder.notices).sort()).toEqual([`delete ${p}x`, `delete ${p}y`]);
    expect((await s.list(p)).entries).toEqual([]);
    await expect(s.put(`${p}z`, '3', { lease: lease.id })).rejects.toBeInstanceOf(DiscoveryLeaseError);
  });

  test('commit replaces a prefix atomically, as one revision', async () => {
    const s = open();
    const p = fresh();
    const oldLease = await s.grantLease(60_000);
    const newLease = await s.grantLease(60_000);
    for (const rank of ['0', '1', '2']) await s.put(`${p}worker/rank/${rank}`, `old-${rank}`, { lease: oldLease.id });
    await s.put(`${p}other`, 'untouched');
    const recorder = await recordWatch(s, p);
    const revision = await s.commit([
      { type: 'deletePrefix', prefix: `${p}worker/` },
      { type: 'put', key: `${p}worker/rank/0`, value: 'new-0', lease: newLease.id },
      { type: 'put', key: `${p}worker/rank/1`, value: 'new-1', lease: newLease.id },
    ]);
    await recorder.until('the commit', (n) => n.length > 0);
    expect(recorder.notices).toHaveLength(1);
    const [notice] = recorder.notices;
    expect(notice).toMatchObject({ type: 'changes', revision });
    expect(changeLog(recorder.notices).sort()).toEqual([
      `delete ${p}worker/rank/2`,
      `put ${p}worker/rank/0`,
      `put ${p}worker/rank/1`,
    ]);
    const listed = await s.list(p);
    expect(listed.entries.map((e) => [e.key, entryText(e), e.lease])).toEqual([
      [`${p}other`, 'untouched', undefined],
      [`${p}worker/rank/0`, 'new-0', newLease.id],
      [`${p}worker/rank/1`, 'new-1', newLease.id],
    ]);
    // The old lease no longer holds the replaced keys.
    await s.revokeLease(oldLease.id);
    expect((await s.list(`${p}worker/`)).entries).toHaveLength(2);
    // Operations apply in order: a later deletePrefix removes an earlier put.
    await s.commit([
      { type: 'put', key: `${p}worker/rank/9`, value: 'gone' },
      { type: 'deletePrefix', prefix: `${p}worker/rank/` },
      { type: 'delete', key: `${p}other` },
    ]);
    expect((await s.list(p)).entries).toEqual([]);
    // A commit with a lease that does not exist writes nothing.
    await s.put(`${p}before`, 'kept');
    await expect(
      s.commit([
        { type: 'deletePrefix', prefix: p },
        { type: 'put', key: `${p}after`, value: 'x', lease: '123456789' },
      ]),
    ).rejects.toMatchObject({ code: 'DISCOVERY_LEASE_NOT_FOUND', lease: '123456789' });
    expect((await s.list(p)).entries.map((e) => e.key)).toEqual([`${p}before`]);
  });

  test('a watcher resumes from a revision and receives every later change in order', async () => {
    const s = open();
    const p = fresh();
    const start = await s.put(`${p}a`, '1');
    await s.put(`${p}b`, '2');
    await s.put(`${p.slice(0, -1)}-elsewhere`, 'not watched');
    await s.delete(`${p}a`);
    const recorder = await recordWatch(s, p, { fromRevision: start });
    await s.put(`${p}c`, '3');
    await recorder.until('four changes', (n) => changeLog(n).length === 4);
    expect(changeLog(recorder.notices)).toEqual([`put ${p}a`, `put ${p}b`, `delete ${p}a`, `put ${p}c`]);
    const revisions = recorder.notices.map((n) => (n.type === 'changes' ? n.revision : -1));
    expect(revisions).toEqual([...revisions].sort((x, y) => x - y));
    expect(revisions[0]).toBe(start);
    expect(recorder.watch.revision).toBe(revisions.at(-1));
    await recorder.watch.close();
    await s.put(`${p}d`, 'after close');
    const resumed = await recordWatch(s, p, { fromRevision: recorder.watch.revision + 1 });
    await resumed.until('the change made while closed', (n) => changeLog(n).length === 1);
    expect(changeLog(resumed.notices)).toEqual([`put ${p}d`]);
  });

  test('a watcher whose history was compacted is told to resync with the current state', async () => {
    const s = open();
    const p = fresh();
    const start = await s.put(`${p}a`, '1');
    await s.put(`${p}b`, '2');
    const latest = await s.delete(`${p}a`).then(() => s.put(`${p}c`, '3'));
    await s.compact(latest);
    const recorder = await recordWatch(s, p, { fromRevision: start });
    await recorder.until('a resync', (n) => n.some((notice) => notice.type === 'resync'));
    const resync = recorder.notices.find((notice) => notice.type === 'resync');
    expect(resync?.type === 'resync' && resync.snapshot.entries.map((e) => e.key)).toEqual([`${p}b`, `${p}c`]);
    await s.put(`${p}d`, '4');
    await recorder.until('the change after the resync', (n) => changeLog(n).includes(`put ${p}d`));
    await expect(s.compact(latest + 1_000_000)).rejects.toBeInstanceOf(DiscoveryArgumentError);
  });

  test('compacting to a revision already compacted does nothing', async () => {
    const s = open();
    const p = fresh();
    const first = await s.put(`${p}a`, '1');
    const latest = await s.put(`${p}a`, '2');
    await s.compact(latest);
    await expect(s.compact(latest)).resolves.toBeUndefined();
    await expect(s.compact(first)).resolves.toBeUndefined();
    expect(entryText((await s.get(`${p}a`))!)).toBe('2');
  });

  test('a conditional commit applies only when every compared key is at its expected revision', async () => {
    const s = open();
    const p = fresh();
    const written = await s.put(`${p}guard`, 'v1');
    const applied = await s.commit([{ type: 'put', key: `${p}a`, value: '1' }], {
      compare: [
        { key: `${p}guard`, modRevision: written },
        { key: `${p}absent`, modRevision: 0 },
      ],
    });
    expect(applied).toBeGreaterThan(written);
    expect((await s.get(`${p}a`))?.modRevision).toBe(applied);

    const rewritten = await s.put(`${p}guard`, 'v2');
    const recorder = await recordWatch(s, p);
    const stale = await s
      .commit(
        [
          { type: 'deletePrefix', prefix: p },
          { type: 'put', key: `${p}b`, value: '2' },
        ],
        { compare: [{ key: `${p}guard`, modRevision: written }] },
      )
      .catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(DiscoveryCompareError);
    expect(stale).toMatchObject({
      code: 'DISCOVERY_COMPARE_FAILED',
      backend: backend.name,
      key: `${p}guard`,
      expected: written,
      actual: rewritten,
    });
    await expect(
      s.commit([{ type: 'put', key: `${p}c`, value: '3' }], { compare: [{ key: `${p}a`, modRevision: 0 }] }),
    ).rejects.toMatchObject({
      key: `${p}a`,
      expected: 0,
      actual: applied,
    });
    // Nothing of the refused commits was written: the next change the watcher sees is this put.
    await s.put(`${p}marker`, 'm');
    await recorder.until('the marker', (n) => changeLog(n).length > 0);
    expect(changeLog(recorder.notices)).toEqual([`put ${p}marker`]);
    expect((await s.list(p)).entries.map((entry) => entry.key)).toEqual([`${p}a`, `${p}guard`, `${p}marker`]);

    await expect(s.commit([], { compare: [{ key: `${p}guard`, modRevision: -1 }] })).rejects.toMatchObject({
      code: 'DISCOVERY_INVALID_ARGUMENT',
      argument: 'compare[0].modRevision',
    });
    await expect(s.commit([], { compare: [{ key: '', modRevision: 0 }] })).rejects.toBeInstanceOf(DiscoveryKeyError);
  });

  test('incarnation epochs: strictly increasing per worker, one per incarnation, never again for a superseded one', async () => {
    const s = open();
    const keyPrefix = fresh();
    const options = { keyPrefix };
    const first = await claimIncarnationEpoch(s, { workerId: 'w', incarnation: 'inc-1' }, options);
    expect(await claimIncarnationEpoch(s, { workerId: 'w', incarnation: 'inc-1' }, options)).toEqual(first);
    const second = await claimIncarnationEpoch(s, { workerId: 'w', incarnation: 'inc-2' }, options);
    expect(second.epoch).toBeGreaterThan(first.epoch);
    expect(await readWorkerEpoch(s, 'w', options)).toEqual({ epoch: second.epoch, incarnation: 'inc-2' });
    const refused = await claimIncarnationEpoch(s, { workerId: 'w', incarnation: 'inc-1' }, options).catch(
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(SupersededError);
    expect(refused).toMatchObject({
      code: 'SUPERSEDED',
      workerId: 'w',
      incarnation: 'inc-1',
      epoch: first.epoch,
      newerEpoch: second.epoch,
      newerIncarnation: 'inc-2',
    });
    // Another worker's epochs are its own.
    expect(await readWorkerEpoch(s, 'other', options)).toBeUndefined();

    // Four ranks of one incarnation claiming at once all get the same epoch.
    const ranks = await Promise.all(
      [0, 1, 2, 3].map(() => claimIncarnationEpoch(s, { workerId: 'w', incarnation: 'inc-3' }, options)),
    );
    expect(new Set(ranks.map((claim) => claim.epoch)).size).toBe(1);
    expect(ranks[0]!.epoch).toBeGreaterThan(second.epoch);
    // Two incarnations claiming at once get two epochs; the fence names the one with the larger.
    const [a, b] = await Promise.all(
      ['inc-4', 'inc-5'].map((incarnation) => claimIncarnationEpoch(s, { workerId: 'w', incarnation }, options)),
    );
    expect(a!.epoch).not.toBe(b!.epoch);
    expect(Math.min(a!.epoch, b!.epoch)).toBeGreaterThan(ranks[0]!.epoch);
    const newest = a!.epoch > b!.epoch ? a! : b!;
    expect(await readWorkerEpoch(s, 'w', options)).toEqual({ epoch: newest.epoch, incarnation: newest.incarnation });
  });

  test('a fenced commit writes only while its epoch is the newest, and tells a superseded writer so', async () => {
    const s = open();
    const keyPrefix = fresh();
    const options = { keyPrefix };
    const old = await claimIncarnationEpoch(s, { workerId: 'w', incarnation: 'inc-1' }, options);
    const written = await commitFenced(
      s,
      old,
      [{ type: 'put', key: `${keyPrefix}state`, value: 'inc-1' }],
      'writing state',
      options,
    );
    const current = await claimIncarnationEpoch(s, { workerId: 'w', incarnation: 'inc-2' }, options);
    const refused = await commitFenced(
      s,
      old,
      [{ type: 'delete', key: `${keyPrefix}state` }],
      'writing state',
      options,
    ).catch((error: unknown) => error);
    expect(refused).toMatchObject({
      code: 'SUPERSEDED',
      incarnation: 'inc-1',
      newerEpoch: current.epoch,
      newerIncarnation: 'inc-2',
      operation: 'writing state',
    });
    expect((await s.get(`${keyPrefix}state`))?.modRevision).toBe(written);
    await commitFenced(
      s,
      current,
      [{ type: 'put', key: `${keyPrefix}state`, value: 'inc-2' }],
      'writing state',
      options,
    );
    expect(entryText((await s.get(`${keyPrefix}state`))!)).toBe('inc-2');
  });

  test('close() is idempotent: closing the store or a watch a second time resolves and changes nothing', async () => {
    const s = open();
    const p = fresh();
    const closedFirst = await recordWatch(s, p);
    await closedFirst.watch.close();
    await expect(closedFirst.watch.close()).resolves.toBeUndefined();
    const closedWithStore = await recordWatch(s, p);
    await s.put(`${p}a`, '1');
    await closedWithStore.until('the put', (n) => changeLog(n).length === 1);
    await s.close();
    await expect(s.close()).resolves.toBeUndefined();
    await expect(closedWithStore.watch.close()).resolves.toBeUndefined();
    await expect(s.get(`${p}a`)).rejects.toBeInstanceOf(DiscoveryClosedError);
    expect(changeLog(closedFirst.notices)).toEqual([]);
  });

  test('after close every operation is refused', async () => {
    const s = open();
    await s.close();
    await expect(s.get('/k')).rejects.toBeInstanceOf(DiscoveryClosedError);
    await expect(s.put('/k', 'v')).rejects.toMatchObject({ code: 'DISCOVERY_CLOSED', operation: 'put' });
  });
});
