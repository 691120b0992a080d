import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { CliContext } from './command.js';
import { ChildCommandError, NotACheckoutError } from './errors.js';

const monorepoName = 'kvreuse-monorepo';

/** The root of the kvreuse repository checkout that holds `from`, or undefined outside one. */
export function findCheckout(from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && existsSync(join(dir, 'scripts', 'dev.mjs'))) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === monorepoName) return dir;
      } catch {
        // not a manifest we can read: keep looking above
      }
    }
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * The checkout around the working directory; outside one, `NotACheckoutError` naming the command and
 * `instead`, what does the job from the installed package.
 */
export function requireCheckout(command: string, context: CliContext, instead?: string): string {
  const root = findCheckout(context.cwd);
  if (root === undefined) throw new NotACheckoutError(command, context.cwd, instead);
  return root;
}

/**
 * Runs a command of the checkout to its end with this process's terminal, in the checkout's root, with
 * the command's environment and `env` over it; `ChildCommandError` when it fails or cannot start.
 */
export function runInCheckout(
  root: string,
  command: string,
  args: readonly string[],
  context: CliContext,
  env: Readonly<Record<string, string>> = {},
): void {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...context.env, ...env } });
  const commandLine = [command, ...args].join(' ');
  if (result.error !== undefined) throw new ChildCommandError(commandLine, result.error.message);
  if (result.status !== 0)
    throw new ChildCommandError(commandLine, result.status ?? result.signal ?? 'an unknown status');
}
