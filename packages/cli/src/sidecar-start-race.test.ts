import * as fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClusterSecret, openSqliteDiscovery, type SqliteDiscoveryStore } from '@kvreuse/discovery';
import type { EngineSidecarOptions } from '@kvreuse/endpoint';
import { afterEach, expect, it, vi } from 'vitest';
import { runCli } from './run.js';
import { abandonPublishing } from './publishing.js';

// Another sidecar starting on the same fresh discovery path creates its files between this one's
// look and its own attempt to create them, or opens or reads a file this one just created: forced here by
// doing it inside this process's calls.
const otherProcessFiles = new Map<string, () => void>();
const afterCreating = new Map<string, () => void>();
const take = (hooks: Map<string, () => void>, path: unknown): void => {
  const hook = typeof path === 'string' ? hooks.get(path) : undefined;
  hooks.delete(path as string);
  hook?.();
};
const takeOtherProcessFile = (path: unknown): void => take(otherProcessFiles, path);

vi.mock('node:fs', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs')>();
  const linkSync: typeof actual.linkSync = (existing, path) => {
    takeOtherProcessFile(path);
    actual.linkSync(existing, path);
    take(afterCreating, path);
  };
  const openSync = ((path: fs.PathLike, ...rest: unknown[]) => {
    takeOtherProcessFile(path);
    const fd = (actual.openSync as (...args: unknown[]) => number)(path, ...rest);
    if (rest[0] === 'wx') take(afterCreating, path);
    return fd;
  }) as typeof actual.openSync;
  return { ...actual, default: { ...actual, linkSync, openSync }, linkSync, openSync };
});

// What each sidecar serves with: the discovery store it publishes to and the secret it seals with.
const servedWith: EngineSidecarOptions[] = [];
vi.mock('@kvreuse/endpoint', async (importOriginal) => {
  const actual = await importOriginal<typeof import('@kvreuse/endpoint')>();
  class RecordedSidecar extends actual.EngineSidecar {
    constructor(options: EngineSidecarOptions) {
      super(options);
      servedWith.push(options);
    }
  }
  return { ...actual, EngineSidecar: RecordedSidecar };
});

const folders: string[] = [];
afterEach(() => {
  servedWith.length = 0;
  otherProcessFiles.clear();
  afterCreating.clear();
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

it('keeps the discovery file and secret it created once another process opened them, while its own start failed', async () => {
  const folder = fs.mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-race-'));
  folders.push(folder);
  const sqlitePath = join(folder, 'd.sqlite');
  const secretPath = `${sqlitePath}.secret`;
  const socket = join(folder, 'engine.sock');
  let other: SqliteDiscoveryStore | undefined;
  let otherSecret: ClusterSecret | undefined;
  // Another sidecar, as it starts, opens the discovery file and reads the secret, each right after this one
  // created it.
  afterCreating.set(sqlitePath, () => {
    other = openSqliteDiscovery(sqlitePath);
    // Taken once this start has looked at it: it cannot listen, and gives up.
    fs.writeFileSync(socket, '');
  });
  afterCreating.set(secretPath, () => (otherSecret = ClusterSecret.read(secretPath)));
  const context = { stdout: () => undefined, stderr: () => undefined, env: {}, cwd: '/' };
  const args = ['sidecar', '--socket', socket, '--engines', '1', '--transport-backend', 'loopback'];
  const sqlite = ['--discovery-backend', 'sqlite', '--discovery-sqlite-path', sqlitePath];

  try {
    expect(await runCli([...args, ...sqlite], context)).toBe(1);
    expect(afterCreating.size).toBe(0);
    await other?.put('/workers/other', 'published');
    const tag = otherSecret?.sign(Buffer.from('published'));
    // A reader that comes later finds what the other sidecar published, and the secret it was sealed with.
    const reader = openSqliteDiscovery(sqlitePath);
    const found = await reader.get('/workers/other');
    await reader.close();
    expect(found && Buffer.from(found.value).toString()).toBe('published');
    expect(ClusterSecret.read(secretPath).verifies(tag!, Buffer.from('published'))).toBe(true);
    expect(fs.readdirSync(folder).sort()).toEqual([
      'd.sqlite',
      'd.sqlite-shm',
      'd.sqlite-wal',
      'd.sqlite.secret',
      'engine.sock',
    ]);
  } finally {
    await other?.close();
  }
});

it.each([
  { step: 'starts opening the discovery file', file: 'd.sqlite' },
  { step: 'reads the cluster secret', file: 'd.sqlite.secret' },
])(
  'seals with the secret on disk when another sidecar gives up the files it created as this one $step',
  async ({ file }) => {
    const folder = fs.mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-race-'));
    folders.push(folder);
    const sqlitePath = join(folder, 'd.sqlite');
    const secretPath = `${sqlitePath}.secret`;
    // Another sidecar created both files and has not started serving; it gives up at this one's step.
    const other = { secret: ClusterSecret.readOrCreate(secretPath), store: openSqliteDiscovery(sqlitePath) };
    expect([other.secret.createdFile, other.store.createdFile]).toEqual([true, true]);
    let abandoned: Promise<void> | undefined;
    otherProcessFiles.set(join(folder, file), () => (abandoned = abandonPublishing(other)));
    let interrupt = async (): Promise<void> => undefined;
    const context = {
      stdout: () => undefined,
      stderr: () => undefined,
      env: {},
      cwd: '/',
      whenInterrupted: (cleanup: () => Promise<void>) => ((interrupt = cleanup), () => undefined),
    };
    const args = ['sidecar', '--socket', join(folder, 'engine.sock'), '--transport-backend', 'loopback'];
    const serving = runCli([...args, '--discovery-backend', 'sqlite', '--discovery-sqlite-path', sqlitePath], context);
    try {
      await abandoned;
      expect(otherProcessFiles.size).toBe(0);
      const [served] = servedWith;
      // What it publishes is sealed with the secret a later reader finds, in the file that reader opens.
      const tag = served!.secret.sign(Buffer.from('published'));
      expect(fs.existsSync(secretPath)).toBe(true);
      expect(ClusterSecret.read(secretPath).verifies(tag, Buffer.from('published'))).toBe(true);
      await served!.discovery.put('/workers/this', 'published');
      const reader = openSqliteDiscovery(sqlitePath);
      const found = await reader.get('/workers/this');
      await reader.close();
      expect(found && Buffer.from(found.value).toString()).toBe('published');
    } finally {
      await interrupt();
      expect(await serving).toBe(0);
    }
  },
);
