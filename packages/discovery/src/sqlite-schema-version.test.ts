import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { betterSqlite3 } from './drivers.js';
import { DiscoveryFileError, DiscoveryFileVersionError } from './errors.js';
import { discoverySchema, openSqliteDiscovery } from './sqlite.js';
import { olderStorePublishes } from '../test/fixtures/older-sqlite-store.js';

const Database = betterSqlite3();
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-version-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The schema version the file at `path` records (`PRAGMA user_version`). */
function versionAt(path: string): number {
  const db = new Database(path, { fileMustExist: true });
  try {
    return db.pragma('user_version', { simple: true }) as number;
  } finally {
    db.close();
  }
}

/** A discovery database at `path` made with the driver: the schema, `sql` after it, and `version` recorded. */
function discoveryFile(path: string, version: number, sql = ''): void {
  const db = new Database(path);
  try {
    db.exec(discoverySchema + sql);
    db.pragma(`user_version = ${version}`);
  } finally {
    db.close();
  }
}

const digestOf = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('the schema version of a SQLite discovery file', () => {
  it('is recorded as 1 in a file whose schema the store created', async () => {
    const path = join(dir, 'new.sqlite');
    const store = openSqliteDiscovery(path);
    await store.put('/workers/a', 'published');
    await store.close();
    expect(versionAt(path)).toBe(1);
  });

  it('is recorded without counting as a write by another store: the creator still removes its file', async () => {
    const path = join(dir, 'given-up.sqlite');
    const creator = openSqliteDiscovery(path);
    expect(creator.createdFile).toBe(true);
    expect(await creator.closeRemovingCreatedFile()).toBe(true);
  });

  it('reads a file without one, written by an older version, as version 1', async () => {
    const path = join(dir, 'older.sqlite');
    olderStorePublishes(new Database(path), '/workers/a', 'published');
    expect(versionAt(path)).toBe(0);
    const store = openSqliteDiscovery(path);
    try {
      const entry = await store.get('/workers/a');
      expect(entry && Buffer.from(entry.value).toString()).toBe('published');
      await store.put('/workers/b', 'after');
      expect((await store.list('/workers/')).entries.map((e) => e.key)).toEqual(['/workers/a', '/workers/b']);
    } finally {
      await store.close();
    }
  });

  it.each([
    { file: 'newer.sqlite', tables: '' },
    { file: 'newer-tables.sqlite', tables: 'CREATE TABLE shards (id INTEGER PRIMARY KEY);' },
  ])(
    'refuses a file of a newer version ($file) with DiscoveryFileVersionError naming both, and changes nothing',
    ({ file, tables }) => {
      const path = join(dir, file);
      discoveryFile(path, 2, tables);
      const before = digestOf(path);
      expect(() => openSqliteDiscovery(path)).toThrow(
        expect.objectContaining({
          constructor: DiscoveryFileVersionError,
          code: 'DISCOVERY_FILE_TOO_NEW',
          location: path,
          version: 2,
          knownVersion: 1,
          message:
            `sqlite discovery at ${path}: the file records schema version 2, newer than version 1, the newest this ` +
            'version of @kvreuse/discovery knows: open it with a newer one; nothing in it was changed',
        }),
      );
      expect(digestOf(path)).toBe(before);
    },
  );

  it('refuses the database of something else that records a version of its own as something else', () => {
    const path = join(dir, 'app.sqlite');
    const db = new Database(path);
    db.exec('CREATE TABLE users (id INTEGER PRIMARY KEY)');
    db.pragma('user_version = 7');
    db.close();
    expect(() => openSqliteDiscovery(path)).toThrow(
      expect.objectContaining({
        constructor: DiscoveryFileError,
        message: `sqlite discovery at ${path}: a SQLite database of something else (its tables: users), not a discovery database; nothing in it was changed`,
      }),
    );
  });
});
