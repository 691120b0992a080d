import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DiscoveryFileError } from './errors.js';
import { discoverySchema, openSqliteDiscovery } from './sqlite.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof import('better-sqlite3');
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-foreign-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const digestOf = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

/** Opening the store at `path` is refused for `reason`, and the file stays as it was. */
function expectRefusedUnchanged(path: string, reason: string): void {
  const before = digestOf(path);
  expect(() => openSqliteDiscovery(path)).toThrow(
    expect.objectContaining({
      constructor: DiscoveryFileError,
      code: 'DISCOVERY_FILE_INVALID',
      location: path,
      message: `sqlite discovery at ${path}: ${reason}; nothing in it was changed`,
    }),
  );
  expect(digestOf(path)).toBe(before);
}

describe('a SQLite discovery path that holds no discovery database', () => {
  it('refuses a database of something else with DiscoveryFileError naming its tables, and changes nothing in it', () => {
    const path = join(dir, 'app.sqlite');
    const other = new Database(path);
    other.exec('CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); CREATE TABLE orders (id INTEGER)');
    other.close();
    expectRefusedUnchanged(
      path,
      'a SQLite database of something else (its tables: orders, users), not a discovery database',
    );
    expect(readdirSync(dir).filter((name) => name.startsWith('app.sqlite'))).toEqual(['app.sqlite']);
  });

  it('refuses a file that is not a SQLite database with DiscoveryFileError, and leaves it as it was', () => {
    const path = join(dir, 'notes.txt');
    writeFileSync(path, 'not a database, and longer than a header '.repeat(4));
    expectRefusedUnchanged(path, 'not a SQLite database');
  });

  it('refuses a discovery schema that records a negative version, which none writes, as not a discovery database', () => {
    const path = join(dir, 'negative.sqlite');
    const made = new Database(path);
    made.exec(discoverySchema);
    made.pragma('user_version = -1');
    made.close();
    expectRefusedUnchanged(
      path,
      "a SQLite database that records schema version -1 (discovery's are 0 or above), not a discovery database",
    );
  });

  it('opens a discovery database it made before', async () => {
    const path = join(dir, 'discovery.sqlite');
    await openSqliteDiscovery(path).close();
    const again = openSqliteDiscovery(path);
    expect(again.createdFile).toBe(false);
    await again.close();
  });
});
