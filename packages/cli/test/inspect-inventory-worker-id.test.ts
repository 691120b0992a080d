import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteDiscovery } from '@kvreuse/discovery';
import { defaultInventoryPrefix } from '@kvreuse/inventory';
import { afterAll, expect, it } from 'vitest';
import { runInProcess } from './binary.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-cli-inspect-inventory-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it('refuses an inventory entry whose worker id cannot be a discovery key, and reports the rest', async () => {
  const sqlitePath = join(dir, 'discovery.sqlite');
  const store = openSqliteDiscovery(sqlitePath);
  const batch = (workerId: string) =>
    JSON.stringify({ version: 3, workerId, incarnation: 'inc-1', epoch: 1, seq: 0, events: [] });
  await store.put(`${defaultInventoryPrefix}decode/0`, batch('decode/0'));
  await store.put(`${defaultInventoryPrefix}decode-1`, batch('decode-1'));
  await store.close();
  const env = { KVREUSE_DISCOVERY_BACKEND: 'sqlite', KVREUSE_DISCOVERY_SQLITE_PATH: sqlitePath };

  const run = await runInProcess(['inspect', '--json'], { env });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  const report = JSON.parse(run.stdout) as { workers: { workerId: string }[]; refusedInventory: string[] };
  expect(report.workers.map((worker) => worker.workerId)).toEqual(['decode-1']);
  expect(report.refusedInventory).toEqual([
    `${defaultInventoryPrefix}decode/0: workerId "decode/0" must be 1–200 characters of letters, digits and ._:@- (it becomes a discovery key segment)`,
  ]);

  const words = await runInProcess(['inspect'], { env });
  expect(words.status).toBe(0);
  expect(words.stdout).toContain(`refused inventory ${defaultInventoryPrefix}decode/0: workerId "decode/0" must be`);
});
