// The start-up stress of the native issue: `workers` Node processes run `cycles` cycles each of agent
// create → allocate → register → load a peer → read → close (cycles.ts), while `victims` more such
// processes at a time are SIGKILLed at random moments and replaced. Every process runs with core dumps
// enabled in a directory of its own; a process that dies any other way is a crash, reported with its
// stderr and, when it left a core and gdb is installed, every thread's backtrace. A process that makes
// no progress for `stallMs` (default 120 s: a hang, not slowness) is a crash too, reported with the
// backtraces gdb takes of it alive before it is killed.
//
// By hand (from packages/native-bindings):
//   tsx --conditions=@kvreuse/source test/startup/stress.ts --workers 4 --cycles 250 --victims 2 [--env UCX_X=y ...]
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface StressOptions {
  readonly workers: number;
  readonly cycles: number;
  /** How many processes to be killed run at a time. */
  readonly victims: number;
  /** Environment added to every process (e.g. UCX settings to compare). */
  readonly env?: Readonly<Record<string, string>>;
  /** How long a process may go without finishing a cycle before it counts as hung (default 120 s). */
  readonly stallMs?: number;
}

export interface Crash {
  readonly role: 'worker' | 'victim';
  readonly pid: number | undefined;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Whether it stopped making progress and was killed for it. */
  readonly hung: boolean;
  readonly cyclesDone: number;
  readonly stderr: string;
  /** The core file, kept for examination, when the process left one. */
  readonly core?: string;
  /** gdb's `thread apply all bt` of the core, or of the hung process. */
  readonly backtrace?: string;
}

export interface StressOutcome {
  /** Cycles completed by the workers (all of them, `workers × cycles`, unless one crashed). */
  readonly workerCycles: number;
  /** Cycles completed by victims before their kill. */
  readonly victimCycles: number;
  readonly victimsKilled: number;
  readonly crashes: readonly Crash[];
}

const cyclesScript = fileURLToPath(new URL('./cycles.ts', import.meta.url));
const tsx = import.meta.resolve('tsx');

interface Running {
  readonly child: ChildProcess;
  readonly dir: string;
  readonly started: Promise<void>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  cyclesDone: number;
  stderr: string;
  lastProgress: number;
  hang?: string;
}

/** Starts cycles.ts in a directory of its own (where its core lands) with `ulimit -c unlimited`. */
function startCycles(cycles: number, env: Readonly<Record<string, string>>): Running {
  const dir = mkdtempSync(join(tmpdir(), 'kvreuse-startup-'));
  const child = spawn(
    '/bin/sh',
    [
      '-c',
      'ulimit -c unlimited && exec "$0" "$@"',
      process.execPath,
      '--expose-gc',
      '--import',
      tsx,
      '--conditions=@kvreuse/source',
      cyclesScript,
      'ucx',
      String(cycles),
    ],
    { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let markStarted: () => void = () => {};
  const running: Running = {
    child,
    dir,
    started: new Promise<void>((resolve) => (markStarted = resolve)),
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
    cyclesDone: 0,
    stderr: '',
    lastProgress: Date.now(),
  };
  child
    .stderr!.setEncoding('utf8')
    .on('data', (chunk: string) => (running.stderr = (running.stderr + chunk).slice(-8000)));
  createInterface({ input: child.stdout! }).on('line', (line) => {
    running.lastProgress = Date.now();
    if (line.includes('"event":"started"')) markStarted();
    if (line.includes('"event":"cycle"')) running.cyclesDone += 1;
  });
  void running.exited.then(markStarted);
  return running;
}

/** The crash record of a process that ended other than expected; keeps its directory when it left a core. */
function crashOf(
  role: Crash['role'],
  running: Running,
  exit: { code: number | null; signal: NodeJS.Signals | null },
): Crash {
  const core = join(running.dir, 'core');
  const base = {
    role,
    pid: running.child.pid,
    ...exit,
    hung: running.hang !== undefined,
    cyclesDone: running.cyclesDone,
    stderr: running.stderr,
  };
  if (running.hang !== undefined) return { ...base, backtrace: running.hang };
  if (!existsSync(core)) return base;
  return { ...base, core, backtrace: backtraces(`${process.execPath} ${core}`) };
}

function backtraces(target: string): string {
  const gdb = spawnSync(
    'gdb',
    ['-batch', '-ex', 'info threads', '-ex', 'thread apply all bt 30', ...target.split(' ')],
    {
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    },
  );
  return gdb.error === undefined ? gdb.stdout : `gdb could not run: ${gdb.error.message}`;
}

const randomDelayMs = (maxMs: number) => new Promise((resolve) => setTimeout(resolve, Math.random() * maxMs));

export async function runStartupStress(options: StressOptions): Promise<StressOutcome> {
  const env = options.env ?? {};
  const crashes: Crash[] = [];
  let workerCycles = 0;
  let victimCycles = 0;
  let victimsKilled = 0;
  let workersRunning = options.workers;
  const stallMs = options.stallMs ?? 120_000;
  const live = new Set<Running>();
  const watchdog = setInterval(() => {
    for (const running of live) {
      if (running.hang !== undefined || Date.now() - running.lastProgress < stallMs) continue;
      running.hang = backtraces(`-p ${running.child.pid}`);
      running.child.kill('SIGKILL');
    }
  }, 1_000);
  const start = (cycles: number) => {
    const running = startCycles(cycles, env);
    live.add(running);
    void running.exited.then(() => live.delete(running));
    return running;
  };

  const settle = (
    role: Crash['role'],
    running: Running,
    exit: { code: number | null; signal: NodeJS.Signals | null },
    expected: boolean,
  ) => {
    if (expected) rmSync(running.dir, { recursive: true, force: true });
    else {
      const crash = crashOf(role, running, exit);
      if (crash.core === undefined) rmSync(running.dir, { recursive: true, force: true });
      crashes.push(crash);
    }
  };

  const worker = async () => {
    const running = start(options.cycles);
    const exit = await running.exited;
    workersRunning -= 1;
    workerCycles += running.cyclesDone;
    settle(
      'worker',
      running,
      exit,
      exit.code === 0 && running.cyclesDone === options.cycles && running.hang === undefined,
    );
  };

  // Each victim slot keeps one process running until the workers are done, killing it at a random
  // moment of its cycles (up to 1.5 s after it started them) and starting the next.
  const victimSlot = async () => {
    while (workersRunning > 0) {
      const running = start(1_000_000);
      await running.started;
      await randomDelayMs(1_500);
      running.child.kill('SIGKILL');
      const exit = await running.exited;
      victimCycles += running.cyclesDone;
      const killed = exit.signal === 'SIGKILL' && running.hang === undefined;
      if (killed) victimsKilled += 1;
      settle('victim', running, exit, killed);
    }
  };

  await Promise.all([
    ...Array.from({ length: options.workers }, worker),
    ...Array.from({ length: options.victims }, victimSlot),
  ]);
  clearInterval(watchdog);
  return { workerCycles, victimCycles, victimsKilled, crashes };
}

function parseArguments(argv: readonly string[]): StressOptions {
  const options = { workers: 4, cycles: 250, victims: 2, env: {} as Record<string, string> };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--env') {
      const [name, ...rest] = value.split('=');
      options.env[name!] = rest.join('=');
    } else if (flag === '--workers' || flag === '--cycles' || flag === '--victims') {
      options[flag.slice(2) as 'workers' | 'cycles' | 'victims'] = Number(value);
    } else throw new Error(`unknown option ${flag}`);
  }
  return options;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = parseArguments(process.argv.slice(2));
  console.log(
    `start-up stress: ${options.workers} workers × ${options.cycles} cycles, ${options.victims} victims at a time, env ${JSON.stringify(options.env)}`,
  );
  const outcome = await runStartupStress(options);
  for (const crash of outcome.crashes) console.log(JSON.stringify(crash, null, 2));
  console.log(
    `worker cycles ${outcome.workerCycles}/${options.workers * options.cycles}, victims killed ${outcome.victimsKilled} ` +
      `(${outcome.victimCycles} cycles before their kill), crashes ${outcome.crashes.length}`,
  );
  process.exitCode = outcome.crashes.length === 0 ? 0 : 1;
}
