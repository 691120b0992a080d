import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A TypeScript child process of this package that talks in JSON lines ({ event, … }) on stdio. */
export interface ScriptProcess {
  readonly child: ChildProcess;
  /** The next message named `event` (rejects if the child exits first, with its stderr). */
  message<T extends object = Record<string, unknown>>(event: string): Promise<T>;
  send(message: object): void;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
}

const packageDir = fileURLToPath(new URL('../..', import.meta.url));
const running = new Set<ChildProcess>();

/** Kills every child still running (call it from afterEach: a timed-out test never reaches its finally). */
export function killChildren(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

export function runScript(script: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): ScriptProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@kvreuse/source', script, ...args], {
    cwd: packageDir,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  running.add(child);
  child.on('exit', () => running.delete(child));
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const received: Record<string, unknown>[] = [];
  const waiting = new Set<() => void>();
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (!line.startsWith('{')) return;
    received.push(JSON.parse(line) as Record<string, unknown>);
    for (const wake of [...waiting]) wake();
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      resolve({ code, signal });
      for (const wake of [...waiting]) wake();
    }),
  );
  return {
    child,
    message<T extends object>(event: string) {
      return new Promise<T>((resolve, reject) => {
        const look = () => {
          const index = received.findIndex((message) => message['event'] === event);
          if (index !== -1) {
            waiting.delete(look);
            resolve(received.splice(index, 1)[0] as T);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            waiting.delete(look);
            reject(
              new Error(
                `${script} ended (${child.exitCode ?? child.signalCode}) before "${event}"; stderr:\n${stderr}`,
              ),
            );
          }
        };
        waiting.add(look);
        look();
      });
    },
    send(message) {
      child.stdin.write(`${JSON.stringify(message)}\n`);
    },
    exit,
    stderr: () => stderr,
  };
}

/** For child scripts: one JSON line to the parent. */
export function tell(message: Record<string, unknown>): void {
  process.stdout.write(
    `${JSON.stringify(message, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))}\n`,
  );
}

/** For child scripts: the parent's next JSON line. */
export async function hear(): Promise<Record<string, unknown>> {
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    lines.close();
    return JSON.parse(line) as Record<string, unknown>;
  }
  throw new Error('the parent closed stdin');
}
