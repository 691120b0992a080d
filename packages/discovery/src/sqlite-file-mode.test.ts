import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineSettings } from '@kvreuse/config';
import { discoveryGroup } from './settings.js';
import { afterAll, afterEach, beforeEach, describe, expect, test } from 'vitest';
import { openDiscovery } from './open.js';
import { openSqliteDiscovery, type SqliteDiscoveryStore } from './sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-mode-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The usual umask, which would leave a plainly created file readable by every local user.
let umaskBefore = 0;
beforeEach(() => {
  umaskBefore = process.umask(0o022);
});
afterEach(() => {
  process.umask(umaskBefore);
});

const modeOf = (path: string) => statSync(path).mode & 0o777;

/** The bits of the database and of its -wal and -shm files while a write keeps them in use. */
async function modesWhileOpen(store: SqliteDiscoveryStore): Promise<number[]> {
  await store.put('kvreuse/probe', 'a record naming some memory');
  return [store.path, `${store.path}-wal`, `${store.path}-shm`].map(modeOf);
}

describe('the sqlite discovery files', () => {
  test('are created for their owner only (0600), the -wal and -shm files too, whatever the umask', async () => {
    const store = openSqliteDiscovery(join(dir, 'default.db'));
    expect(await modesWhileOpen(store)).toEqual([0o600, 0o600, 0o600]);
    await store.close();
  });

  test('are created with the mode the operator sets, through the option and through discovery.sqlite_file_mode', async () => {
    const direct = openSqliteDiscovery(join(dir, 'group.db'), { fileMode: 0o640 });
    expect(await modesWhileOpen(direct)).toEqual([0o640, 0o640, 0o640]);
    await direct.close();
    const path = join(dir, 'from-settings.db');
    const argv = [
      '--discovery-backend',
      'sqlite',
      '--discovery-sqlite-path',
      path,
      '--discovery-sqlite-file-mode',
      '0660',
    ];
    const settings = defineSettings([discoveryGroup]).resolve({ argv }).settings.discovery;
    const fromSettings = openDiscovery(settings) as SqliteDiscoveryStore;
    expect(await modesWhileOpen(fromSettings)).toEqual([0o660, 0o660, 0o660]);
    await fromSettings.close();
  });

  test('a file that exists keeps the mode its operator gave it', async () => {
    const path = join(dir, 'existing.db');
    writeFileSync(path, '');
    chmodSync(path, 0o644);
    const store = openSqliteDiscovery(path);
    expect(await modesWhileOpen(store)).toEqual([0o644, 0o644, 0o644]);
    await store.close();
  });

  test('refuses a mode that would lock its owner out or is not permission bits, creating nothing', () => {
    for (const fileMode of [0o400, 0o1600, -1, 1.5, Number.NaN]) {
      const path = join(dir, `refused-${String(fileMode)}.db`);
      expect(() => openSqliteDiscovery(path, { fileMode })).toThrow(
        expect.objectContaining({ code: 'DISCOVERY_INVALID_ARGUMENT', argument: 'fileMode' }),
      );
      expect(() => statSync(path)).toThrow(/ENOENT/);
    }
    for (const mode of ['0400', '600x', '8600']) {
      const argv = ['--discovery-sqlite-file-mode', mode];
      expect(() => defineSettings([discoveryGroup]).resolve({ argv })).toThrow(/discovery-sqlite-file-mode/);
    }
  });
});
