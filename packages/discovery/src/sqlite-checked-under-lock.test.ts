import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { betterSqlite3 } from './drivers.js';
import { DiscoveryFileError, DiscoveryFileVersionError, DiscoveryUnavailableError } from './errors.js';
import type { WatchNotice } from './types.js';
import { discoverySchema, openSqliteDiscovery } from './sqlite.js';

// What another process writes to the file after an opening checked it and before it takes the write lock,
// forced by running it inside the opening's switch to WAL mode, which comes between the two.
const afterWalMode = new Map<string, () => void>();
// What another process writes after the transaction that checked and claimed the file and before the one
// that records the store's clock, forced by running it when the opening prepares its last statement.
const clockStatement = 'INSERT INTO clock (id) VALUES (?)';
const beforeClockWrite = new Map<string, () => void>();

function runHook(hooks: Map<string, () => void>, path: string): void {
  const hook = hooks.get(path);
  hooks.delete(path);
  hook?.();
}

vi.mock('./drivers.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('./drivers.js')>();
  const Driver = actual.betterSqlite3();
  class HookedDriver extends Driver {
    override pragma(source: string, options?: Parameters<InstanceType<typeof Driver>['pragma']>[1]): unknown {
      const result = super.pragma(source, options);
      if (source === 'journal_mode = WAL') runHook(afterWalMode, this.name);
      return result;
    }
    // The base's own signature, so that the store's statements keep their types.
    override prepare<Bound extends unknown[] | {} = unknown[], Result = unknown>(source: string) {
      const statement = super.prepare<Bound, Result>(source);
      if (source === clockStatement) runHook(beforeClockWrite, this.name);
      return statement;
    }
  }
  return { ...actual, betterSqlite3: () => HookedDriver };
});

const Database = betterSqlite3();
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-under-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => expect([afterWalMode.size, beforeClockWrite.size]).toEqual([0, 0]));

/** Runs `sql` on the file at `path` through a connection of its own, as another process would. */
function writeAsAnother(path: string, sql: string): void {
  const db = new Database(path, { fileMustExist: true });
  try {
    db.exec(sql);
  } finally {
    db.close();
  }
}

/** The file's schema version and the tables it holds, read through a connection of its own. */
function contentsOf(path: string): { version: number; tables: string[]; meta: string[] } {
  const db = new Database(path, { fileMustExist: true, readonly: true });
  try {
    return {
      version: db.pragma('user_version', { simple: true }) as number,
      tables: db.prepare<[], string>("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all(),
      meta: db.prepare<[], string>('SELECT name FROM meta ORDER BY name').pluck().all(),
    };
  } finally {
    db.close();
  }
}

const newerSchema = `${discoverySchema} CREATE TABLE IF NOT EXISTS shards (id INTEGER PRIMARY KEY); PRAGMA user_version = 2;`;

describe('a SQLite discovery file changed between its opening’s first check and its write lock', () => {
  it('is refused as newer, untouched, when a newer version upgraded the file this opening found', async () => {
    const path = join(dir, 'upgraded.sqlite');
    await openSqliteDiscovery(path).close();
    afterWalMode.set(path, () => writeAsAnother(path, newerSchema));

    expect(() => openSqliteDiscovery(path)).toThrow(
      expect.objectContaining({ constructor: DiscoveryFileVersionError, location: path, version: 2, knownVersion: 1 }),
    );
    expect(contentsOf(path)).toEqual({
      version: 2,
      tables: ['clock', 'events', 'kv', 'leases', 'meta', 'shards', 'sqlite_sequence'],
      meta: ['compacted', 'revision'],
    });
  });

  it('is refused as newer, and kept, when a newer version wrote its schema into the file this opening created', () => {
    const path = join(dir, 'created.sqlite');
    afterWalMode.set(path, () => writeAsAnother(path, newerSchema));

    expect(() => openSqliteDiscovery(path)).toThrow(
      expect.objectContaining({ constructor: DiscoveryFileVersionError, location: path, version: 2 }),
    );
    expect(existsSync(path)).toBe(true);
    expect(contentsOf(path).version).toBe(2);
  });

  it('is refused as the database of something else when another program added its tables', async () => {
    const path = join(dir, 'taken-over.sqlite');
    await openSqliteDiscovery(path).close();
    afterWalMode.set(path, () => writeAsAnother(path, 'CREATE TABLE users (id INTEGER PRIMARY KEY)'));

    expect(() => openSqliteDiscovery(path)).toThrow(
      expect.objectContaining({
        constructor: DiscoveryFileError,
        message: `sqlite discovery at ${path}: a SQLite database of something else (its tables: users), not a discovery database; nothing in it was changed`,
      }),
    );
    expect(contentsOf(path).meta).toEqual(['compacted', 'revision']);
  });
});

/** The file's clock, keys and leases, read through a connection of its own. */
function publishedIn(path: string): { clock: string[]; keys: string[]; leases: number } {
  const db = new Database(path, { fileMustExist: true, readonly: true });
  try {
    return {
      clock: db.prepare<[], string>('SELECT id FROM clock').pluck().all(),
      keys: db
        .prepare<[], Buffer>('SELECT key FROM kv ORDER BY key')
        .pluck()
        .all()
        .map((key) => key.toString('utf8')),
      leases: db.prepare<[], number>('SELECT COUNT(*) FROM leases').pluck().get() ?? 0,
    };
  } finally {
    db.close();
  }
}

const refusedAsNewer = (path: string) =>
  expect.objectContaining({ constructor: DiscoveryFileVersionError, location: path, version: 2, knownVersion: 1 });

/** A file a store of clock `first-boot` published `/workers/a` in, under a lease, and `/static` without one. */
async function publishedFile(name: string): Promise<string> {
  const path = join(dir, name);
  const store = openSqliteDiscovery(path, { clockId: 'first-boot' });
  const lease = await store.grantLease(60_000);
  await store.put('/workers/a', 'published', { lease: lease.id });
  await store.put('/static', 'kept');
  await store.close();
  return path;
}

describe('a SQLite discovery file a newer version upgraded after a store opened it', () => {
  it('is refused as newer by the opening’s clock write, which drops no lease of another clock', async () => {
    const path = await publishedFile('upgraded-while-opening.sqlite');
    beforeClockWrite.set(path, () => writeAsAnother(path, newerSchema));

    expect(() => openSqliteDiscovery(path, { clockId: 'second-boot' })).toThrow(refusedAsNewer(path));
    expect(publishedIn(path)).toEqual({ clock: ['first-boot'], keys: ['/static', '/workers/a'], leases: 1 });
  });

  it('is refused as newer by every later write, with nothing written', async () => {
    const path = await publishedFile('upgraded-while-open.sqlite');
    const store = openSqliteDiscovery(path, { clockId: 'first-boot' });
    try {
      const lease = await store.grantLease(60_000);
      writeAsAnother(path, newerSchema);

      await expect(store.put('/workers/b', 'late')).rejects.toThrow(refusedAsNewer(path));
      await expect(store.delete('/static')).rejects.toThrow(refusedAsNewer(path));
      await expect(store.grantLease(60_000)).rejects.toThrow(refusedAsNewer(path));
      await expect(store.keepAlive(lease.id)).rejects.toThrow(refusedAsNewer(path));
      await expect(store.revokeLease(lease.id)).rejects.toThrow(refusedAsNewer(path));
      await expect(store.commit([{ type: 'delete', key: '/static' }])).rejects.toThrow(refusedAsNewer(path));
      await expect(store.compact(1)).rejects.toThrow(refusedAsNewer(path));
      expect(publishedIn(path)).toEqual({ clock: ['first-boot'], keys: ['/static', '/workers/a'], leases: 2 });
    } finally {
      await store.close();
    }
  });
  it('is refused as newer by every later read, a watch’s poll included', async () => {
    const path = await publishedFile('upgraded-while-read.sqlite');
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const store = openSqliteDiscovery(path, { clockId: 'first-boot', pollIntervalMs: 10 });
    try {
      const notices: WatchNotice[] = [];
      await store.watch('/workers/', (notice) => notices.push(notice));
      writeAsAnother(path, newerSchema);

      await expect(store.get('/static')).rejects.toThrow(refusedAsNewer(path));
      await expect(store.list('/workers/')).rejects.toThrow(refusedAsNewer(path));
      await expect(store.watch('/static', () => {})).rejects.toThrow(refusedAsNewer(path));
      vi.advanceTimersByTime(10);
      // The poll's notice is queued as a microtask: this one runs after it.
      await new Promise<void>((resolve) => queueMicrotask(resolve));
      expect(notices).toEqual([
        {
          type: 'outage',
          error: expect.objectContaining({
            constructor: DiscoveryUnavailableError,
            operation: 'watch poll',
            cause: refusedAsNewer(path),
          }),
        },
      ]);
    } finally {
      await store.close();
      vi.useRealTimers();
    }
  });
});
