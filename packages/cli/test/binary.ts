// Runs the built `kvreuse` binary (the package's bin entry) as a child process, as a user would.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = join(packageDir, '../..');
const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { bin: { kvreuse: string } };
export const binPath = join(packageDir, manifest.bin.kvreuse);

export interface BinaryRun {
  readonly status: number | null;
  /** The signal that ended it, when one did (then `status` is null). */
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stderr split into lines, without the empty one after the last newline. */
  readonly stderrLines: readonly string[];
}

export interface RunOptions {
  readonly cwd?: string;
  /** The child's whole environment besides PATH and TMPDIR (no KVREUSE_* of this process leaks in). */
  readonly env?: Readonly<Record<string, string>>;
}

/** The binary while it runs: signal it once its output shows how far it got. */
export interface StartedBinary {
  readonly child: ChildProcess;
  /** Resolves with the first line of stdout that matches, once it is printed; rejects if the binary ends without one. */
  stdoutLine(pattern: RegExp): Promise<RegExpMatchArray>;
  readonly finished: Promise<BinaryRun>;
}

export function startBinary(args: readonly string[], options: RunOptions = {}): StartedBinary {
  const child = spawn(process.execPath, [binPath, ...args], {
    cwd: options.cwd ?? packageDir,
    // TMPDIR: the test run's own temporary folder, which must be empty when the run ends.
    env: {
      PATH: process.env.PATH ?? '',
      ...(process.env.TMPDIR === undefined ? {} : { TMPDIR: process.env.TMPDIR }),
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const finished = new Promise<BinaryRun>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (status, signal) =>
      resolve({ status, signal, stdout, stderr, stderrLines: stderr.split('\n').filter((line) => line !== '') }),
    );
  });
  const stdoutLine = (pattern: RegExp): Promise<RegExpMatchArray> =>
    new Promise((resolve, reject) => {
      const look = (): boolean => {
        const found = stdout
          .split('\n')
          .slice(0, -1)
          .map((line) => line.match(pattern))
          .find((match) => match !== null);
        if (found !== undefined) resolve(found);
        return found !== undefined;
      };
      if (look()) return;
      const onData = (): void => {
        if (look()) child.stdout.off('data', onData);
      };
      child.stdout.on('data', onData);
      void finished.then(() => {
        if (!look())
          reject(new Error(`the binary ended without a line matching ${pattern} on stdout:\n${stdout}${stderr}`));
      }, reject);
    });
  return { child, stdoutLine, finished };
}

/**
 * Transport deadlines no pull on a loaded machine comes near, for the demo runs whose tests assert a pull's
 * outcome: under the example settings' 1000 ms a pull on a busy machine times out and is recomputed, and the
 * outcome would depend on the machine's speed.
 */
export const unhurriedTransport = [
  '--transport-operation-timeout-ms',
  '60000',
  '--transport-abandon-timeout-ms',
  '120000',
  '--transport-shutdown-deadline-ms',
  '120000',
] as const;

/**
 * For the demo runs whose tests assert the router's decisions: each lookup runs to its end. On a loaded
 * machine a lookup can work past the 2 ms budget, and turn 2 would be recomputed (`budget-exceeded`).
 */
export const unboundedLookup = ['--unbounded-lookup'] as const;

export function runBinary(args: readonly string[], options: RunOptions = {}): Promise<BinaryRun> {
  return startBinary(args, options).finished;
}

/**
 * `runCli` in this process with the context the binary gives it (this environment's PATH and TMPDIR and
 * `options.env`, `options.cwd`), but no signals: for the tests of what a command prints and how it exits,
 * which a process each would spend a second of CPU on starting Node for. The binary's own entry runs in
 * test/conventions.test.ts and the tests that signal or pipe it.
 */
export async function runInProcess(args: readonly string[], options: RunOptions = {}): Promise<BinaryRun> {
  const { runCli } = await import('../src/run.js');
  let [stdout, stderr] = ['', ''];
  const status = await runCli([...args], {
    stdout: (text) => void (stdout += text),
    stderr: (text) => void (stderr += text),
    env: {
      PATH: process.env.PATH ?? '',
      ...(process.env.TMPDIR === undefined ? {} : { TMPDIR: process.env.TMPDIR }),
      ...options.env,
    },
    cwd: options.cwd ?? packageDir,
  });
  return { status, signal: null, stdout, stderr, stderrLines: stderr.split('\n').filter((line) => line !== '') };
}
