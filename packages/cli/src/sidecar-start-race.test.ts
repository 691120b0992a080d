import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { runCli } from './run.js';

// Another sidecar starting on the same fresh discovery path creates its files between this one's
// look and its own attempt to create them: forced here by creating them inside this process's calls.
const otherProcessFiles = new Map<string, () => void>();
const takeOtherProcessFile = (path: unknown): void => {
  const create = typeof path === 'string' ? otherProcessFiles.get(path) : undefined;
  otherProcessFiles.delete(path as string);
  create?.();
};

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const linkSync: typeof actual.linkSync = (existing, path) => {
    takeOtherProcessFile(path);
    actual.linkSync(existing, path);
  };
  const openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    takeOtherProcessFile(path);
    return (actual.openSync as (...args: unknown[]) => number)(path, ...rest);
  }) as typeof actual.openSync;
  return { ...actual, default: { ...actual, linkSync, openSync }, linkSync, openSync };
});

const folders: string[] = [];
afterEach(() => {
  otherProcessFiles.clear();
  for (const folder of folders.splice(0)) fs.rmSync(folder, { recursive: true, force: true });
});

it('keeps the discovery file and secret another sidecar created while its own start failed', async () => {
  const folder = fs.mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-race-'));
  folders.push(folder);
  const sqlitePath = join(folder, 'd.sqlite');
  const secretPath = `${sqlitePath}.secret`;
  const socket = join(folder, 'engine.sock');
  const otherSecret = randomBytes(32);
  otherProcessFiles.set(secretPath, () => {
    fs.writeFileSync(secretPath, otherSecret, { mode: 0o600 });
    // Taken once this start has looked at it: it cannot listen, and gives up.
    fs.writeFileSync(socket, '');
  });
  otherProcessFiles.set(sqlitePath, () => fs.writeFileSync(sqlitePath, '', { mode: 0o600 }));
  const stderr: string[] = [];
  const context = { stdout: () => undefined, stderr: (text: string) => void stderr.push(text), env: {}, cwd: '/' };
  const args = ['sidecar', '--socket', socket, '--engines', '1', '--transport-backend', 'loopback'];
  const sqlite = ['--discovery-backend', 'sqlite', '--discovery-sqlite-path', sqlitePath];

  expect(await runCli([...args, ...sqlite], context)).toBe(1);
  expect(otherProcessFiles.size).toBe(0);
  expect(fs.readdirSync(folder).sort()).toEqual(['d.sqlite', 'd.sqlite.secret', 'engine.sock']);
  expect(fs.readFileSync(secretPath).equals(otherSecret)).toBe(true);
});
