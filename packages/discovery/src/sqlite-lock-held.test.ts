import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { betterSqlite3 } from './drivers.js';
import { DiscoveryLockHeldError, DiscoveryUnavailableError } from './errors.js';
import { openSqliteDiscovery } from './sqlite.js';

const Database = betterSqlite3();
const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-lock-held-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs `step` while another connection to the file at `path` holds its write lock. */
async function whileLockHeld<T>(path: string, step: () => Promise<T>): Promise<T> {
  const writer = new Database(path, { fileMustExist: true });
  writer.exec('BEGIN IMMEDIATE');
  try {
    return await step();
  } finally {
    writer.exec('ROLLBACK');
    writer.close();
  }
}

const lockHeld = (path: string, operation: string, subject: string) =>
  expect.objectContaining({
    constructor: DiscoveryLockHeldError,
    code: 'DISCOVERY_UNAVAILABLE',
    backend: 'sqlite',
    operation,
    location: path,
    busyTimeoutMs: 1,
    message:
      `sqlite discovery at ${path}: ${subject} failed: another writer held the file's write lock for longer than ` +
      'busyTimeoutMs (1 ms); nothing was written',
  });

describe('a SQLite store whose write waits past busyTimeoutMs for another writer’s lock', () => {
  it('refuses a put or a commit with DiscoveryLockHeldError naming the file, and writes nothing', async () => {
    const path = join(dir, 'contended.sqlite');
    const store = openSqliteDiscovery(path, { busyTimeoutMs: 1 });
    try {
      await whileLockHeld(path, async () => {
        const put = store.put('/workers/a', 'published');
        await expect(put).rejects.toThrow(lockHeld(path, 'put', 'put of key "/workers/a"'));
        await expect(put).rejects.toBeInstanceOf(DiscoveryUnavailableError);
        await expect(store.commit([{ type: 'put', key: '/workers/b', value: 'published' }])).rejects.toThrow(
          lockHeld(path, 'commit', 'commit'),
        );
      });
      expect((await store.list('/workers/')).entries).toEqual([]);
      expect(await store.put('/workers/a', 'published')).toBe(1);
    } finally {
      await store.close();
    }
  });

  it('refuses to open the file with DiscoveryLockHeldError, and keeps it', async () => {
    const path = join(dir, 'opened-while-held.sqlite');
    await openSqliteDiscovery(path).close();
    await whileLockHeld(path, async () =>
      expect(() => openSqliteDiscovery(path, { busyTimeoutMs: 1 })).toThrow(lockHeld(path, 'open', 'open')),
    );
    const store = openSqliteDiscovery(path);
    expect(store.createdFile).toBe(false);
    await store.close();
  });
});
