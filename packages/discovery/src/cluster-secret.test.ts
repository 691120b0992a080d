import { spawn } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterSecretError } from './errors.js';
import { ClusterSecret, openClusterSecret } from './cluster-secret.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-secret-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function secretFile(name: string, bytes: Buffer | string, mode = 0o600): string {
  const path = join(dir, name);
  writeFileSync(path, bytes, { mode });
  chmodSync(path, mode);
  return path;
}

const bytes = new Uint8Array([1, 2, 3]);
const refused = (secret: string, reason: RegExp) =>
  expect.objectContaining({ code: 'CLUSTER_SECRET_REFUSED', secret, message: expect.stringMatching(reason) });

describe('ClusterSecret.read', () => {
  it('reads an owner-only file of at least 32 bytes; the same bytes sign alike, other bytes differently', () => {
    const one = ClusterSecret.read(secretFile('one', 'a'.repeat(32)));
    const again = ClusterSecret.read(join(dir, 'one'));
    const other = ClusterSecret.read(secretFile('other', 'b'.repeat(32)));
    expect(one.origin).toBe(join(dir, 'one'));
    expect(one.sign(bytes)).toEqual(again.sign(bytes));
    expect(one.sign(bytes)).toHaveLength(32);
    expect(other.sign(bytes)).not.toEqual(one.sign(bytes));
    expect(one.verifies(again.sign(bytes), bytes)).toBe(true);
    expect(one.verifies(other.sign(bytes), bytes)).toBe(false);
    expect(one.verifies(one.sign(bytes).subarray(0, 31), bytes)).toBe(false);
  });

  it("authenticates under a key of its own per purpose: not the plain signature, nor another purpose's", () => {
    const one = ClusterSecret.read(secretFile('purposes', 'a'.repeat(32)));
    const other = ClusterSecret.read(secretFile('purposes-other', 'b'.repeat(32)));
    const tag = one.authenticate('pin messages', bytes);
    expect(tag).toHaveLength(32);
    expect(one.authenticate('pin messages', bytes.subarray(0, 1), bytes.subarray(1))).toEqual(tag);
    expect(tag).not.toEqual(one.sign(bytes));
    expect(tag).not.toEqual(one.authenticate('other purpose', bytes));
    expect(tag).not.toEqual(other.authenticate('pin messages', bytes));
  });

  it('refuses a file open to its group or others, too short, too long, missing or a directory', () => {
    for (const mode of [0o640, 0o604, 0o620, 0o602]) {
      const path = secretFile(`mode-${mode.toString(8)}`, 'c'.repeat(32), mode);
      expect(() => ClusterSecret.read(path)).toThrow(
        refused(path, new RegExp(`open to its group or others \\(mode 0${mode.toString(8)}\\); chmod 600 it`)),
      );
    }
    const short = secretFile('short', 'd'.repeat(31));
    expect(() => ClusterSecret.read(short)).toThrow(
      refused(short, /holds 31 bytes; a cluster secret holds 32 to 4096/),
    );
    const long = secretFile('long', Buffer.alloc(4097, 1));
    expect(() => ClusterSecret.read(long)).toThrow(refused(long, /holds 4097 bytes/));
    const missing = join(dir, 'missing');
    expect(() => ClusterSecret.read(missing)).toThrow(refused(missing, /cannot be opened \(ENOENT\)/));
    const directory = join(dir, 'a-directory');
    mkdirSync(directory);
    expect(() => ClusterSecret.read(directory)).toThrow(refused(directory, /is not a regular file/));
    expect(() => ClusterSecret.read(short)).toThrow(ClusterSecretError);
  });

  it('follows a symbolic link and checks the file it names', () => {
    const target = secretFile('target', 'e'.repeat(32));
    const link = join(dir, 'link');
    symlinkSync(target, link);
    expect(ClusterSecret.read(link).sign(bytes)).toEqual(ClusterSecret.read(target).sign(bytes));
    chmodSync(target, 0o644);
    expect(() => ClusterSecret.read(link)).toThrow(refused(link, /open to its group or others \(mode 0644\)/));
  });
});

describe('ClusterSecret.readOrCreate', () => {
  it('creates 32 random bytes with mode 0600 when absent, and reads the existing file after, leaving no temporary file', () => {
    const path = join(dir, 'created.secret');
    const created = ClusterSecret.readOrCreate(path);
    expect(created.createdFile).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path)).toHaveLength(32);
    const before = readFileSync(path);
    const readAfter = ClusterSecret.readOrCreate(path);
    expect(readAfter.createdFile).toBe(false);
    expect(ClusterSecret.read(path).createdFile).toBe(false);
    expect(readAfter.sign(bytes)).toEqual(created.sign(bytes));
    expect(readFileSync(path)).toEqual(before);
    expect(readdirSync(dir).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('processes creating the file at once all read the one file that won', async () => {
    const path = join(dir, 'raced.secret');
    const script = `import { ClusterSecret } from ${JSON.stringify(new URL('./cluster-secret.ts', import.meta.url).href)};
      process.stdout.write(ClusterSecret.readOrCreate(${JSON.stringify(path)}).sign(new Uint8Array([1, 2, 3])).toString('hex'));`;
    const signatures = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<string>((resolve, reject) => {
            const child = spawn(process.execPath, [
              '--conditions=@kvreuse/source',
              '--import',
              'tsx',
              '--input-type=module',
              '-e',
              script,
            ]);
            let out = '';
            let err = '';
            child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
            child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
            child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`exited ${code}: ${err}`))));
          }),
      ),
    );
    expect(new Set(signatures).size).toBe(1);
    expect(signatures[0]).toBe(ClusterSecret.read(path).sign(bytes).toString('hex'));
  });

  it('refuses to create a secret in a directory that does not exist', () => {
    const path = join(dir, 'nowhere', 'x.secret');
    expect(() => ClusterSecret.readOrCreate(path)).toThrow(refused(path, /cannot be created \(ENOENT\)/));
  });
});

describe('openClusterSecret', () => {
  it('reads the named secret file whatever the backend', () => {
    const path = secretFile('named', 'f'.repeat(40));
    for (const backend of ['memory', 'sqlite', 'etcd'] as const) {
      expect(openClusterSecret({ backend, sqlitePath: join(dir, 'unused.sqlite'), secretFile: path }).origin).toBe(
        path,
      );
    }
    expect(readdirSync(dir)).not.toContain('unused.sqlite.secret');
  });

  it('refuses a named secret file it cannot use, naming the setting and the file', () => {
    const open = secretFile('group-readable', 'g'.repeat(32), 0o640);
    expect(() => openClusterSecret({ backend: 'etcd', sqlitePath: 'unused', secretFile: open })).toThrow(
      expect.objectContaining({
        code: 'CLUSTER_SECRET_REFUSED',
        setting: 'discovery.secret_file',
        secret: open,
        message: `cluster secret discovery.secret_file = ${open} is open to its group or others (mode 0640); chmod 600 it`,
      }),
    );
  });

  it('sqlite without a secret file: <sqlitePath>.secret beside the database, created once', () => {
    const sqlitePath = join(dir, 'discovery.sqlite');
    const first = openClusterSecret({ backend: 'sqlite', sqlitePath, secretFile: '' });
    expect(first.origin).toBe(`${sqlitePath}.secret`);
    expect(statSync(`${sqlitePath}.secret`).mode & 0o777).toBe(0o600);
    expect(openClusterSecret({ backend: 'sqlite', sqlitePath, secretFile: '' }).sign(bytes)).toEqual(first.sign(bytes));
  });

  it("memory without a secret file: the process's one random secret", () => {
    const memory = openClusterSecret({ backend: 'memory', sqlitePath: 'unused', secretFile: '' });
    expect(memory).toBe(openClusterSecret({ backend: 'memory', sqlitePath: 'unused', secretFile: '' }));
    expect(memory.origin).toBe(`random secret of process ${process.pid}`);
  });

  it('etcd without a secret file, and a secret file that is not a string, are refused', () => {
    expect(() => openClusterSecret({ backend: 'etcd', sqlitePath: 'unused', secretFile: '' })).toThrow(
      refused(
        'discovery.secret_file',
        /is empty, and the etcd backend has no default: name a file of at least 32 random bytes, mode 0600/,
      ),
    );
    expect(() => openClusterSecret({ backend: 'sqlite', sqlitePath: 'unused', secretFile: 7 as never })).toThrow(
      refused('discovery.secret_file', /must be a path/),
    );
  });
});
