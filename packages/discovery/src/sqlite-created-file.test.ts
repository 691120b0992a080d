import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it, vi } from 'vitest';
import { DiscoveryFileError } from './errors.js';
import { openSqliteDiscovery } from './sqlite.js';

/** Database files that turn out unopenable right after this process created them. */
const spoiledOnCreation = new Set<string>();

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    const fd = (actual.openSync as (...args: unknown[]) => number)(path, ...rest);
    if (typeof path === 'string' && spoiledOnCreation.delete(path))
      actual.writeSync(fd, 'not a database, and longer than a header '.repeat(4));
    return fd;
  }) as typeof actual.openSync;
  return { ...actual, default: { ...actual, openSync }, openSync };
});

const dir = fs.mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-created-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

it('says whether opening the store created its database file', async () => {
  const path = join(dir, 'shared.sqlite');
  const first = openSqliteDiscovery(path);
  const second = openSqliteDiscovery(path);
  expect([first.createdFile, second.createdFile]).toEqual([true, false]);
  await second.close();
  await first.close();
});

it('removes the database file it created, with its journals, when opening it fails', () => {
  const path = join(dir, 'spoiled.sqlite');
  spoiledOnCreation.add(path);
  expect(() => openSqliteDiscovery(path)).toThrow(DiscoveryFileError);
  expect(spoiledOnCreation.size).toBe(0);
  expect(fs.readdirSync(dir).filter((name) => name.startsWith('spoiled'))).toEqual([]);
});

it('keeps a database file it did not create when opening it fails', () => {
  const path = join(dir, 'text.sqlite');
  fs.writeFileSync(path, 'not a database, and longer than a header');
  expect(() => openSqliteDiscovery(path)).toThrow(DiscoveryFileError);
  expect(fs.readFileSync(path, 'utf8')).toBe('not a database, and longer than a header');
});
