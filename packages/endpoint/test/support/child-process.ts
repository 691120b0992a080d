// A child process of a test that speaks in JSON lines: each stdout line an event `{ event, ... }`; its
// stdin takes commands, one line each. `next(event)` resolves with its next line of that event, or
// rejects with its stderr once it exits first.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const packageDir = fileURLToPath(new URL('../..', import.meta.url));

/**
 * Runs `script` (a path from the package root) with `args` (and `env` added), under `launcher` when given (a command
 * and its arguments, such as `unshare ...`, that runs the rest of its command line); `cleanups` gets its SIGKILL.
 */
export function startChild<Line extends { readonly event: string }>(
  script: string,
  args: readonly string[],
  cleanups: (() => unknown)[],
  env: Record<string, string> = {},
  launcher: readonly string[] = [],
) {
  const command = [process.execPath, '--import', 'tsx', '--conditions=@kvreuse/source', script, ...args];
  const [file, ...rest] = [...launcher, ...command];
  const child = spawn(file!, rest, {
    cwd: packageDir,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  cleanups.push(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const seen: Line[] = [];
  const waiters: { event: string; resolve: (line: Line) => void; reject: (error: Error) => void }[] = [];
  createInterface({ input: child.stdout }).on('line', (text) => {
    const line = JSON.parse(text) as Line;
    const waiter = waiters.find((candidate) => candidate.event === line.event);
    if (waiter === undefined) seen.push(line);
    else waiters.splice(waiters.indexOf(waiter), 1)[0]!.resolve(line);
  });
  child.once('exit', (code) => {
    for (const waiter of waiters.splice(0))
      waiter.reject(new Error(`${script} exited (${code}) before '${waiter.event}': ${stderr}`));
  });
  return {
    child,
    next: (event: Line['event']): Promise<Line> => {
      const early = seen.findIndex((line) => line.event === event);
      if (early >= 0) return Promise.resolve(seen.splice(early, 1)[0]!);
      return new Promise((resolve, reject) => waiters.push({ event, resolve, reject }));
    },
    send: (command: object): void => void child.stdin.write(`${JSON.stringify(command)}\n`),
  };
}
