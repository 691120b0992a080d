import { spawnSync } from 'node:child_process';

/** Runs a command to its end; returns its stdout, or throws with the command, how it ended and all it printed. */
export function runToSuccess(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): string {
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.error !== undefined) throw new Error(`could not start ${command}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(
      `${[command, ...args].join(' ')} (in ${options.cwd}) exited with ${result.status ?? result.signal}\n` +
        `--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`,
    );
  }
  return result.stdout;
}
