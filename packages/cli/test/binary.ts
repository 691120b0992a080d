// Runs the built `kvreuse` binary (the package's bin entry) as a child process, as a user would.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = join(packageDir, '../..');
const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { bin: { kvreuse: string } };
export const binPath = join(packageDir, manifest.bin.kvreuse);

export interface BinaryRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stderr split into lines, without the empty one after the last newline. */
  readonly stderrLines: readonly string[];
}

export interface RunOptions {
  readonly cwd?: string;
  /** The child's whole environment besides PATH (no KVREUSE_* of this process leaks in). */
  readonly env?: Readonly<Record<string, string>>;
}

export function runBinary(args: readonly string[], options: RunOptions = {}): Promise<BinaryRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [binPath, ...args], {
      cwd: options.cwd ?? packageDir,
      env: { PATH: process.env.PATH ?? '', ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout, stderr, stderrLines: stderr.split('\n').filter((line) => line !== '') }));
  });
}
