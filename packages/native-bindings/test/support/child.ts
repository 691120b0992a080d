import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A Node child running a TypeScript script of this package, speaking JSON lines on stdin/stdout. */
export interface Child {
  readonly process: ChildProcess;
  /** Resolves with the next message whose `event` is `event` (rejects if the child exits first). */
  next<T = Record<string, unknown>>(event: string): Promise<T>;
  send(message: unknown): void;
  /** Resolves with the exit code once the child has exited. */
  readonly exited: Promise<number | null>;
  /** What the child wrote to stderr so far. */
  stderr(): string;
}

const packageDir = fileURLToPath(new URL('../..', import.meta.url));

export interface ScriptOptions {
  readonly args?: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /** Extra flags for node itself, e.g. `--expose-gc`. */
  readonly nodeFlags?: readonly string[];
  /** A command that runs node in turn, e.g. `ip netns exec <name>` (it must exec node, not fork it). */
  readonly launcher?: readonly string[];
}

export function spawnScript(script: string, options: ScriptOptions = {}): Child {
  const { args = [], env = {}, nodeFlags = [], launcher = [] } = options;
  const nodeArgs = [...nodeFlags, '--import', 'tsx', '--conditions=@kvreuse/source', script, ...args];
  const [command, ...commandArgs] = [...launcher, process.execPath, ...nodeArgs] as [string, ...string[]];
  const child = spawn(command, commandArgs, {
    cwd: packageDir,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let errors = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    errors += chunk;
  });
  const messages: Record<string, unknown>[] = [];
  const waiters: { event: string; resolve: (message: never) => void; reject: (error: Error) => void }[] = [];
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deliver = () => {
    for (const waiter of [...waiters]) {
      const index = messages.findIndex((m) => m['event'] === waiter.event);
      if (index === -1) continue;
      const [message] = messages.splice(index, 1);
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(message as never);
    }
  };
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (!line.startsWith('{')) return;
    messages.push(JSON.parse(line) as Record<string, unknown>);
    deliver();
  });
  void exited.then((code) => {
    for (const waiter of waiters.splice(0)) {
      waiter.reject(new Error(`${script} exited with ${code} before sending "${waiter.event}"; stderr:\n${errors}`));
    }
  });
  return {
    process: child,
    next<T>(event: string) {
      return new Promise<T>((resolve, reject) => {
        waiters.push({ event, resolve: resolve as (message: never) => void, reject });
        deliver();
        if (child.exitCode !== null) {
          reject(new Error(`${script} exited with ${child.exitCode} before sending "${event}"; stderr:\n${errors}`));
        }
      });
    },
    send(message) {
      child.stdin.write(`${JSON.stringify(message)}\n`);
    },
    exited,
    stderr: () => errors,
  };
}

/** For child scripts: writes one JSON message line to stdout. */
export function emit(message: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/**
 * For child scripts: the next JSON message from the parent (stdin, one per line). When the parent
 * goes away first (stdin ends), the child exits with status 2 instead of lingering.
 */
export function nextMessageFromParent(): Promise<Record<string, unknown>> {
  parentLines ??= createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  return parentLines.next().then((line) => {
    if (line.done === true) process.exit(2);
    return JSON.parse(line.value as string) as Record<string, unknown>;
  });
}

let parentLines: AsyncIterator<string> | undefined;

/** For child scripts: waits until the parent sends `{ command }` (exits if the parent goes away). */
export async function untilParentSays(command: string): Promise<void> {
  while ((await nextMessageFromParent())['command'] !== command) {
    // other messages are not for this wait
  }
}

/** For child scripts: exit (status 2) as soon as the parent goes away, whatever the script is waiting for. */
export function exitWithParent(): void {
  process.stdin.on('end', () => process.exit(2));
}
