import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { loadTransport } from '@kvreuse/native-bindings';
import { runCli } from './run.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const folders: string[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

function capture() {
  const out = { stdout: '', stderr: '' };
  const context = {
    stdout: (text: string) => void (out.stdout += text),
    stderr: (text: string) => void (out.stderr += text),
    env: {},
    cwd: '/',
  };
  return { out, context };
}

describe('kvreuse sidecar', () => {
  it('adopts an engine’s memfd, publishes it, and withdraws it when the engine’s connection ends', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    const socket = join(folder, 'engine.sock');
    const { out, context } = capture();
    const flags = ['--transport-backend', 'loopback', '--discovery-backend', 'sqlite'];
    const serving = runCli(
      ['sidecar', '--socket', socket, '--engines', '1', ...flags, '--discovery-sqlite-path', join(folder, 'd.sqlite')],
      context,
    );
    // The engine runs apart: its adoption waits for the sidecar's answer on its own thread.
    const engine = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--conditions=@kvreuse/source', 'test/sidecar-engine.ts', socket],
      { cwd: packageDir, encoding: 'utf8' },
    );
    expect(JSON.parse(engine.stdout)).toMatchObject({ type: 'adopted', workerId: 'cli-engine' });
    expect(await serving).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^connection 1: process \d+ connected$/);
    expect(lines[1]).toMatch(
      /^connection 1: adopted 1 banks of cli-engine \(incarnation cli-engine-[0-9a-f]+, epoch \d+\)$/,
    );
    expect(lines[2]).toBe(
      'connection 1: cli-engine withdrawn: 0 pins revoked (engine-gone), 1 banks returned, 0 retained, unmapped',
    );
  }, 120_000);

  it('serves GPU memory only behind a declared profile’s admission gate', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    const flags = ['--transport-backend', 'loopback', '--discovery-backend', 'sqlite'];
    const reasonWith = async (name: string, profile: string[]) => {
      const socket = join(folder, `${name}.sock`);
      const { context } = capture();
      let interrupt = async (): Promise<void> => undefined;
      const interruptible = {
        ...context,
        whenInterrupted: (cleanup: () => Promise<void>) => ((interrupt = cleanup), () => undefined),
      };
      const sqlite = ['--discovery-sqlite-path', join(folder, `${name}.sqlite`)];
      const serving = runCli(['sidecar', '--socket', socket, ...flags, ...sqlite, ...profile], interruptible);
      const engine = await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', '--conditions=@kvreuse/source', 'test/sidecar-vram-engine.ts', socket],
        { cwd: packageDir, encoding: 'utf8' },
      );
      await interrupt();
      expect(await serving).toBe(0);
      return (JSON.parse(engine.stdout) as { reason: string }).reason;
    };
    expect(await reasonWith('no-profile', [])).toBe('vram-not-supported');
    // Behind the gate the handle reaches the driver: none here (refused as unavailable), or a real one that
    // refuses a handle of zeros.
    const { vram } = loadTransport().capabilities();
    expect(await reasonWith('profile', ['--profile-name', 'qwen3-0.6b-bf16-b64'])).toBe(
      vram.supported ? 'bad-ipc-handle' : 'vram-unavailable',
    );
  }, 120_000);

  it('refuses a socket path it cannot listen on before it creates anything', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    const taken = join(folder, 'taken.sock');
    writeFileSync(taken, '');
    const sqlite = join(folder, 'd.sqlite');
    const refused = async (socket: string): Promise<string> => {
      const { out, context } = capture();
      const args = ['sidecar', '--socket', socket, '--engines', '1', '--transport-backend', 'loopback'];
      const status = await runCli(
        [...args, '--discovery-backend', 'sqlite', '--discovery-sqlite-path', sqlite],
        context,
      );
      expect(out.stderr.split('\n')).toHaveLength(2);
      expect(status).toBe(2);
      return out.stderr;
    };
    expect(await refused(taken)).toMatch(/^kvreuse: sidecar: --socket .*taken\.sock exists: remove it first/);
    expect(await refused(join(folder, 'none', 'engine.sock'))).toMatch(
      /^kvreuse: sidecar: --socket .*engine\.sock: its folder .*none is not a directory/,
    );
    expect(await refused(join(folder, 'a'.repeat(120)))).toMatch(
      /^kvreuse: sidecar: --socket .*: a unix socket path is at most 107 bytes/,
    );
    expect(await refused(join(folder, 'a'.repeat(300)))).toMatch(
      /^kvreuse: sidecar: --socket .*: a unix socket path is at most 107 bytes/,
    );
    expect(await refused('')).toMatch(/^kvreuse: sidecar: --socket needs a value, not an empty one: --socket <path>/);
    expect(await refused(join(taken, 'engine.sock'))).toMatch(
      /^kvreuse: sidecar: --socket .*engine\.sock: its folder .*taken\.sock is not a directory/,
    );
    // No discovery file (nor its secret) left behind by a sidecar that never listened.
    expect(readdirSync(folder)).toEqual(['taken.sock']);
  });

  it('refuses a cluster secret it cannot read, and leaves no discovery file behind', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    const { out, context } = capture();
    const status = await runCli(
      [
        'sidecar',
        '--socket',
        join(folder, 'engine.sock'),
        '--engines',
        '1',
        '--transport-backend',
        'loopback',
        '--discovery-backend',
        'sqlite',
        '--discovery-sqlite-path',
        join(folder, 'd.sqlite'),
        '--discovery-secret-file',
        join(folder, 'missing.secret'),
      ],
      context,
    );
    expect(status).toBe(2);
    expect(out.stderr).toMatch(/discovery\.secret_file/);
    expect(readdirSync(folder)).toEqual([]);
  });

  it('leaves nothing it created when its SQLite discovery cannot be opened', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    mkdirSync(join(folder, 'folder.sqlite'));
    writeFileSync(join(folder, 'text.sqlite'), 'not a database, and longer than a header');
    execFileSync('mkfifo', [join(folder, 'fifo.sqlite')]);
    const started = async (sqlitePath: string): Promise<{ status: number; stderr: string }> => {
      const { out, context } = capture();
      const args = ['sidecar', '--socket', join(folder, 'engine.sock'), '--engines', '1'];
      const flags = ['--transport-backend', 'loopback', '--discovery-backend', 'sqlite'];
      const status = await runCli([...args, ...flags, '--discovery-sqlite-path', sqlitePath], context);
      return { status, stderr: out.stderr };
    };
    expect(await started(join(folder, 'folder.sqlite'))).toEqual({
      status: 2,
      stderr: expect.stringMatching(/folder\.sqlite: a directory, not a SQLite discovery file.*\[INPUT_FILE\]/),
    });
    expect(await started(join(folder, 'none', 'd.sqlite'))).toEqual({
      status: 2,
      stderr: expect.stringMatching(/d\.sqlite: its folder .*none is not a directory.*\[INPUT_FILE\]/),
    });
    expect(await started(join(folder, 'text.sqlite', 'd.sqlite'))).toEqual({
      status: 2,
      stderr: expect.stringMatching(/d\.sqlite: its folder .*text\.sqlite is not a directory.*\[INPUT_FILE\]/),
    });
    expect(await started(join(folder, 'fifo.sqlite'))).toEqual({
      status: 2,
      stderr: expect.stringMatching(/fifo\.sqlite: not a regular file, so not a SQLite discovery file.*\[INPUT_FILE\]/),
    });
    expect(await started(join(folder, 'text.sqlite'))).toEqual({
      status: 2,
      stderr: `kvreuse: ${join(folder, 'text.sqlite')}: not a SQLite database, so not a SQLite discovery file (set --discovery-sqlite-path) [INPUT_FILE]\n`,
    });
    expect(readdirSync(folder).sort()).toEqual(['fifo.sqlite', 'folder.sqlite', 'text.sqlite']);
    expect(readFileSync(join(folder, 'text.sqlite'), 'utf8')).toBe('not a database, and longer than a header');
  });

  it('removes the discovery file and secret it created when it cannot listen on its socket', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    const socket = join(folder, 'engine.sock');
    // The warning about the unknown variable comes after the socket was checked and before it is listened on.
    const context = {
      ...capture().context,
      env: { KVREUSE_UNKNOWN: '1' },
      stderr: (text: string) => void (text.includes('unknown KVREUSE_') && writeFileSync(socket, '')),
    };
    const args = ['sidecar', '--socket', socket, '--engines', '1', '--transport-backend', 'loopback'];
    const sqlite = ['--discovery-backend', 'sqlite', '--discovery-sqlite-path', join(folder, 'd.sqlite')];
    expect(await runCli([...args, ...sqlite], context)).toBe(1);
    expect(readdirSync(folder)).toEqual(['engine.sock']);
  });

  it('refuses a transport.library that is not there, naming the file and the setting, before it creates anything', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    const { out, context } = capture();
    const library = join(folder, 'none.so');
    const args = ['sidecar', '--socket', join(folder, 'engine.sock'), '--engines', '1', '--transport-library', library];
    const sqlite = ['--discovery-backend', 'sqlite', '--discovery-sqlite-path', join(folder, 'd.sqlite')];
    expect(await runCli([...args, ...sqlite], context)).toBe(2);
    expect(out.stderr).toBe(
      `kvreuse: ${library}: no such file, so no native library to load (transport.library from argv --transport-library) [INPUT_FILE]\n`,
    );
    expect(readdirSync(folder)).toEqual([]);
  });

  it('refuses a profile it cannot admit before it creates anything', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    const { out, context } = capture();
    const args = ['sidecar', '--socket', join(folder, 'engine.sock'), '--engines', '1', '--profile-name', 'none'];
    const flags = ['--transport-backend', 'loopback', '--discovery-backend', 'sqlite'];
    const status = await runCli([...args, ...flags, '--discovery-sqlite-path', join(folder, 'd.sqlite')], context);
    expect(status).toBe(2);
    expect(out.stderr).toMatch(/no built-in deployment profile is named "none"/);
    expect(readdirSync(folder)).toEqual([]);
  });

  it('takes its discovery file and cluster secret from the command’s working directory', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'kvreuse-sidecar-cli-'));
    folders.push(folder);
    expect(folder).not.toBe(process.cwd());
    const serve = async (name: string, secretFlags: string[]): Promise<void> => {
      let interrupt = async (): Promise<void> => undefined;
      const context = {
        ...capture().context,
        cwd: folder,
        whenInterrupted: (cleanup: () => Promise<void>) => ((interrupt = cleanup), () => undefined),
      };
      const flags = ['--transport-backend', 'loopback', '--discovery-backend', 'sqlite'];
      const sqlite = ['--discovery-sqlite-path', `${name}.sqlite`, ...secretFlags];
      // The command runs up to serving before runCli returns: its files are there once it has.
      const serving = runCli(['sidecar', '--socket', `${name}.sock`, ...flags, ...sqlite], context);
      expect(readdirSync(folder)).toContain(`${name}.sock`);
      await interrupt();
      expect(await serving).toBe(0);
    };
    await serve('default', []);
    expect(readdirSync(folder)).toContain('default.sqlite.secret');
    expect(existsSync(join(process.cwd(), 'default.sqlite.secret'))).toBe(false);
    writeFileSync(join(folder, 'named.secret'), randomBytes(32), { mode: 0o600 });
    await serve('named', ['--discovery-secret-file', 'named.secret']);
    expect(readdirSync(folder).sort()).toEqual([
      'default.sqlite',
      'default.sqlite.secret',
      'named.secret',
      'named.sqlite',
    ]);
  });

  it('needs a socket, and refuses memory discovery (no reader could find the engines)', async () => {
    const { out, context } = capture();
    expect(await runCli(['sidecar', '--engines', '1'], context)).not.toBe(0);
    expect(out.stderr).toContain('--socket <path> is required');
    const memory = capture();
    const args = ['sidecar', '--socket', '/tmp/none.sock', '--engines', '1', '--discovery-backend', 'memory'];
    expect(await runCli(args, memory.context)).not.toBe(0);
    expect(memory.out.stderr).toContain('discovery.backend = memory holds one process only');
  });
});
