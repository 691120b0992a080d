import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, expect, it, vi } from 'vitest';
import { betterSqlite3 } from './drivers.js';
import { DiscoveryFileError, DiscoveryUnavailableError } from './errors.js';
import { openSqliteDiscovery, type SqliteDiscoveryStore } from './sqlite.js';
import { olderStorePublishes } from '../test/fixtures/older-sqlite-store.js';

// What another store or process does between two steps of an opening, forced by running it inside this
// process's calls: right after this process created a database file, right after it looked at one that
// existed, and right after it connected to one.
const afterCreating = new Map<string, (fd: number) => void>();
const afterLookingAt = new Map<string, () => void>();
const afterConnecting = new Map<string, () => void>();
const removals: string[] = [];
const take = <T>(hooks: Map<string, T>, path: unknown): T | undefined => {
  const hook = typeof path === 'string' ? hooks.get(path) : undefined;
  hooks.delete(path as string);
  return hook;
};

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    const fd = (actual.openSync as (...args: unknown[]) => number)(path, ...rest);
    if (rest[0] === 'wx') take(afterCreating, path)?.(fd);
    return fd;
  }) as typeof actual.openSync;
  const statSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    const stats = (actual.statSync as (...args: unknown[]) => fs.Stats | undefined)(path, ...rest);
    take(afterLookingAt, path)?.();
    return stats;
  }) as typeof actual.statSync;
  const rmSync: typeof actual.rmSync = (path, options) => {
    removals.push(String(path));
    actual.rmSync(path, options);
  };
  const overrides = { openSync, statSync, rmSync };
  return { ...actual, ...overrides, default: { ...actual, ...overrides } };
});

vi.mock('./drivers.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('./drivers.js')>();
  const Driver = actual.betterSqlite3();
  class HookedDriver extends Driver {
    constructor(path: string, options?: ConstructorParameters<typeof Driver>[1]) {
      super(path, options);
      take(afterConnecting, path)?.();
    }
  }
  return { ...actual, betterSqlite3: () => HookedDriver };
});

const dir = fs.mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-created-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const stores: SqliteDiscoveryStore[] = [];
const open = (path: string, options?: Parameters<typeof openSqliteDiscovery>[1]): SqliteDiscoveryStore => {
  const store = openSqliteDiscovery(path, options);
  stores.push(store);
  return store;
};
afterEach(async () => {
  removals.length = 0;
  for (const store of stores.splice(0)) await store.close();
  expect([afterCreating.size, afterLookingAt.size, afterConnecting.size]).toEqual([0, 0, 0]);
});

const filesOf = (name: string): string[] =>
  fs
    .readdirSync(dir)
    .filter((file) => file.startsWith(name))
    .sort();
const valueAt = async (store: SqliteDiscoveryStore, key: string): Promise<string | undefined> => {
  const entry = await store.get(key);
  return entry === undefined ? undefined : Buffer.from(entry.value).toString();
};

it('says whether opening the store created its database file', async () => {
  const path = join(dir, 'shared.sqlite');
  const first = open(path);
  const second = open(path);
  expect([first.createdFile, second.createdFile]).toEqual([true, false]);
});

it('removes the database file it created, with its journals, when opening it fails', () => {
  const path = join(dir, 'spoiled.sqlite');
  afterCreating.set(path, (fd) => fs.writeSync(fd, 'not a database, and longer than a header '.repeat(4)));
  expect(() => openSqliteDiscovery(path)).toThrow(DiscoveryFileError);
  expect(filesOf('spoiled')).toEqual([]);
});

it('keeps a database file it did not create when opening it fails', () => {
  const path = join(dir, 'text.sqlite');
  fs.writeFileSync(path, 'not a database, and longer than a header');
  expect(() => openSqliteDiscovery(path)).toThrow(DiscoveryFileError);
  expect(fs.readFileSync(path, 'utf8')).toBe('not a database, and longer than a header');
});

it('keeps the file it created when its opening fails after another store opened it, which goes on being found', async () => {
  const path = join(dir, 'busy.sqlite');
  let other: SqliteDiscoveryStore | undefined;
  const writer = betterSqlite3();
  let lockHolder: InstanceType<typeof writer> | undefined;
  afterCreating.set(path, () => {
    other = open(path);
    // Holds the write lock, so the first opening's own schema transaction fails.
    lockHolder = new writer(path);
    lockHolder.exec('BEGIN IMMEDIATE');
  });
  expect(() => openSqliteDiscovery(path, { busyTimeoutMs: 1 })).toThrow(DiscoveryUnavailableError);
  lockHolder?.exec('ROLLBACK');
  lockHolder?.close();

  await other?.put('/workers/a', 'published');
  const later = open(path);
  expect(later.createdFile).toBe(false);
  expect(await valueAt(later, '/workers/a')).toBe('published');
});

it('closeRemovingCreatedFile keeps the file while another store has it open: that store goes on being found', async () => {
  const path = join(dir, 'open.sqlite');
  const creator = openSqliteDiscovery(path);
  const other = open(path);
  expect(await creator.closeRemovingCreatedFile()).toBe(false);

  await other.put('/workers/a', 'published');
  expect(await valueAt(open(path), '/workers/a')).toBe('published');
});

it('closeRemovingCreatedFile keeps the file another store opened and closed again, with what it left', async () => {
  const path = join(dir, 'used.sqlite');
  const creator = openSqliteDiscovery(path);
  const other = openSqliteDiscovery(path);
  await other.put('/config/a', 'kept');
  await other.close();
  expect(await creator.closeRemovingCreatedFile()).toBe(false);
  expect(await valueAt(open(path), '/config/a')).toBe('kept');
});

it('closeRemovingCreatedFile keeps the file a store of an older version published to and closed, which made no claim', async () => {
  const path = join(dir, 'older.sqlite');
  const creator = openSqliteDiscovery(path);
  olderStorePublishes(new (betterSqlite3())(path, { fileMustExist: true }), '/workers/a', 'published');
  expect(await creator.closeRemovingCreatedFile()).toBe(false);
  expect(await valueAt(open(path), '/workers/a')).toBe('published');
});

it('closeRemovingCreatedFile keeps the file an older store published to between its creation and its first write', async () => {
  const path = join(dir, 'older-first.sqlite');
  afterCreating.set(path, () =>
    olderStorePublishes(new (betterSqlite3())(path, { fileMustExist: true }), '/workers/a', 'published'),
  );
  const creator = openSqliteDiscovery(path);
  expect(creator.createdFile).toBe(true);
  expect(await creator.closeRemovingCreatedFile()).toBe(false);
  expect(await valueAt(open(path), '/workers/a')).toBe('published');
});

it('closeRemovingCreatedFile removes the file no other store opened, and a later opening makes a fresh one', async () => {
  const path = join(dir, 'alone.sqlite');
  const creator = openSqliteDiscovery(path);
  await creator.put('/workers/a', 'gone');
  expect(await creator.closeRemovingCreatedFile()).toBe(true);
  expect(filesOf('alone')).toEqual([]);

  const later = open(path);
  expect(later.createdFile).toBe(true);
  expect(await valueAt(later, '/workers/a')).toBe(undefined);
});

it('closeRemovingCreatedFile removes the companion files first, and only with the file', async () => {
  const removed = join(dir, 'companion.sqlite');
  fs.writeFileSync(`${removed}.secret`, 'created for it');
  expect(await openSqliteDiscovery(removed).closeRemovingCreatedFile({ companionFiles: [`${removed}.secret`] })).toBe(
    true,
  );
  // Gone before the database file, while its exclusive lock held off every store opening it.
  expect(removals).toEqual([`${removed}.secret`, `${removed}-wal`, `${removed}-shm`, removed]);
  expect(filesOf('companion')).toEqual([]);

  const kept = join(dir, 'kept-companion.sqlite');
  const creator = openSqliteDiscovery(kept);
  open(kept);
  fs.writeFileSync(`${kept}.secret`, 'created for it');
  expect(await creator.closeRemovingCreatedFile({ companionFiles: [`${kept}.secret`] })).toBe(false);
  expect(filesOf('kept-companion.sqlite')).toContain('kept-companion.sqlite.secret');
});

it('closeRemovingCreatedFile refuses companion files that are no array of paths, and keeps the store open', async () => {
  const path = join(dir, 'bad-companions.sqlite');
  const store = open(path);
  for (const companionFiles of [`${path}.secret`, [''], [5]]) {
    await expect(store.closeRemovingCreatedFile({ companionFiles } as never)).rejects.toMatchObject({
      code: 'DISCOVERY_INVALID_ARGUMENT',
      argument: 'companionFiles',
      value: companionFiles,
      message: expect.stringMatching(
        /^sqlite discovery: companionFiles = .* is refused: companion files are an array of paths$/,
      ),
    });
  }
  await expect(store.closeRemovingCreatedFile(null as never)).rejects.toMatchObject({ argument: 'options' });
  await store.put('/workers/a', 'still open');
  expect(await valueAt(store, '/workers/a')).toBe('still open');
});

it('closeRemovingCreatedFile on a store that did not create its file removes nothing', async () => {
  const path = join(dir, 'found.sqlite');
  open(path);
  expect(await openSqliteDiscovery(path).closeRemovingCreatedFile()).toBe(false);
  expect(filesOf('found.sqlite')).toContain('found.sqlite');
});

/** Opens `path` while the store that created it removes it, right after `step` of this opening. */
async function openAsItsCreatorRemovesIt(path: string, step: Map<string, () => void>): Promise<SqliteDiscoveryStore> {
  const creator = openSqliteDiscovery(path);
  let removed: Promise<boolean> | undefined;
  step.set(path, () => (removed = creator.closeRemovingCreatedFile()));
  const later = open(path);
  expect(await removed).toBe(true);
  return later;
}

it('an opening whose file its creator removed before it connected creates a fresh one, with the file mode', async () => {
  const path = join(dir, 'looked-at.sqlite');
  const later = await openAsItsCreatorRemovesIt(path, afterLookingAt);
  expect(later.createdFile).toBe(true);
  expect(fs.statSync(path).mode & 0o777).toBe(0o600);
});

it('an opening whose file its creator removed once it connected opens again, and what it publishes is found', async () => {
  const path = join(dir, 'connected.sqlite');
  const later = await openAsItsCreatorRemovesIt(path, afterConnecting);
  expect(later.createdFile).toBe(true);

  await later.put('/workers/a', 'published');
  expect(await valueAt(open(path), '/workers/a')).toBe('published');
});

it('closeRemovingCreatedFile on a closed store is DiscoveryClosedError', async () => {
  const store = openSqliteDiscovery(join(dir, 'closed.sqlite'));
  await store.close();
  await expect(store.closeRemovingCreatedFile()).rejects.toMatchObject({
    code: 'DISCOVERY_CLOSED',
    message: 'sqlite discovery: closeRemovingCreatedFile after close',
  });
  expect(filesOf('closed.sqlite')).toContain('closed.sqlite');
});

it('an opening whose file was replaced once it connected opens the new one before it writes, and what it publishes is found', async () => {
  const path = join(dir, 'replaced.sqlite');
  const creator = openSqliteDiscovery(path);
  let removed: Promise<boolean> | undefined;
  let replacement: SqliteDiscoveryStore | undefined;
  afterConnecting.set(path, () => {
    removed = creator.closeRemovingCreatedFile();
    replacement = open(path);
  });
  const later = open(path);
  expect(await removed).toBe(true);
  expect([replacement?.createdFile, later.createdFile]).toEqual([true, false]);

  await later.put('/workers/a', 'published');
  expect(await valueAt(open(path), '/workers/a')).toBe('published');
  // Once the log is copied into the database file, a store reads that file: the replacement's.
  await replacement?.put('/workers/b', 'replacement');
  const checkpointer = new (betterSqlite3())(path);
  checkpointer.pragma('wal_checkpoint(TRUNCATE)');
  checkpointer.close();
  expect(await valueAt(later, '/workers/b')).toBe('replacement');
});
