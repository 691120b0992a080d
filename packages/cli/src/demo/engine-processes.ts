// The decode side of `kvreuse demo --engine test`, as OS processes: the checkout's test engine
// (tools/test-engine/src/engine-process.ts), which owns its KV memory and publishes vLLM's KV events, and
// a `kvreuse sidecar` that adopts that memory and serves it. Both report one JSON object a line on stdout.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, watch } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Settings } from '../settings/all-settings.js';
import { DemoProcessError } from '../errors.js';

/** A child process that reports JSON lines, each with its kind in `field`. */
export class JsonLinesProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  readonly #field: string;
  readonly #lines: Record<string, unknown>[] = [];
  readonly #stderr: string[] = [];
  readonly #waiting = new Set<() => boolean>();
  #ended = false;

  /** `tmpdir`: the process's TMPDIR, the run's own folder (what tsx caches there goes with it). */
  constructor(name: string, field: string, command: string, args: readonly string[], cwd: string, tmpdir: string) {
    this.name = name;
    this.#field = field;
    this.child = spawn(command, args, {
      cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, TMPDIR: tmpdir },
    });
    // A process killed mid-write closes its end of the pipe: that is its exit's news, not an error here.
    this.child.stdin?.on('error', () => undefined);
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.#ended = true;
        this.#notify();
        resolve({ code, signal });
      }),
    );
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      try {
        this.#lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        this.#stderr.push(line);
      }
      this.#notify();
    });
    createInterface({ input: this.child.stderr as NodeJS.ReadableStream }).on('line', (line) => {
      this.#stderr.push(line);
      if (this.#stderr.length > 20) this.#stderr.shift();
    });
  }

  /** Its last lines of stderr (and of stdout that were no JSON), for an error to show. */
  get stderr(): readonly string[] {
    return this.#stderr;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The first line of this kind not taken yet; DemoProcessError if the process ends first or `timeoutMs` passes. */
  next(kind: string, timeoutMs: number): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(check);
        reject(new DemoProcessError(this.name, `said no "${kind}" within ${timeoutMs} ms`, this.#stderr));
      }, timeoutMs);
      const check = (): boolean => {
        const at = this.#lines.findIndex((line) => line[this.#field] === kind);
        if (at < 0 && !this.#ended) return false;
        clearTimeout(timer);
        if (at < 0) reject(new DemoProcessError(this.name, `ended before it said "${kind}"`, this.#stderr));
        else resolve(this.#lines.splice(at, 1)[0]!);
        return true;
      };
      if (!check()) this.#waiting.add(check);
    });
  }

  send(message: object): void {
    this.child.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  #notify(): void {
    for (const check of [...this.#waiting]) if (check()) this.#waiting.delete(check);
  }
}

// From the sources (tests, tsx) the binary runs through tsx; from dist it is plain JavaScript.
const self = fileURLToPath(import.meta.url);
const fromSource = self.endsWith('.ts');
const binary = join(dirname(self), '..', `bin.${fromSource ? 'ts' : 'js'}`);
const nodeArgs = fromSource ? ['--conditions=@kvreuse/source', '--import', 'tsx'] : [];

/** The setting flags that give a `kvreuse sidecar` the run's discovery, transport and block hash seed. */
function sidecarFlags(settings: Settings, libraryPath: string | undefined): string[] {
  const { transport, discovery, inventory } = settings;
  const flags = [
    '--discovery-backend',
    'sqlite',
    '--discovery-sqlite-path',
    discovery.sqlitePath,
    '--transport-backend',
    transport.backend,
  ];
  if (libraryPath !== undefined) flags.push('--transport-library', libraryPath);
  if (transport.ucxTransports !== '') flags.push('--transport-ucx-transports', transport.ucxTransports);
  if (transport.ucxNetDevices !== '') flags.push('--transport-ucx-net-devices', transport.ucxNetDevices);
  if (inventory.hashSeed !== '') flags.push('--inventory-hash-seed', inventory.hashSeed);
  return flags;
}

/** Resolves once `path` exists: the sidecar listens there. */
function untilExists(path: string, sidecar: JsonLinesProcess, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const watcher = watch(dirname(path));
    const done = (error?: Error): void => {
      watcher.close();
      clearTimeout(timer);
      if (error === undefined) resolve();
      else reject(error);
    };
    const timer = setTimeout(
      () => done(new DemoProcessError(sidecar.name, `made no socket at ${path} within ${timeoutMs} ms`, [])),
      timeoutMs,
    );
    watcher.on('change', (_event, name) => {
      if (name === basename(path) && existsSync(path)) done();
    });
    void sidecar.exited.then(() =>
      done(new DemoProcessError(sidecar.name, `ended before it listened`, sidecar.stderr)),
    );
    if (existsSync(path)) done();
  });
}

/** `kvreuse sidecar --socket <socket> --engines 1 --json`, listening: it ends once its engine is withdrawn. Both processes' TMPDIR is the socket's folder, the run's own. */
export async function startSidecar(
  settings: Settings,
  socket: string,
  libraryPath: string | undefined,
  timeoutMs: number,
): Promise<JsonLinesProcess> {
  const args = [...nodeArgs, binary, 'sidecar', '--socket', socket, '--engines', '1', '--json'];
  const sidecar = new JsonLinesProcess(
    'kvreuse sidecar',
    'kind',
    process.execPath,
    [...args, ...sidecarFlags(settings, libraryPath)],
    process.cwd(),
    dirname(socket),
  );
  await untilExists(socket, sidecar, timeoutMs);
  return sidecar;
}

/** The checkout's test engine as a process, adopting its memory into the sidecar at `socket` as `workerId`. */
export function startTestEngine(checkout: string, socket: string, workerId: string): JsonLinesProcess {
  const script = join(checkout, 'tools', 'test-engine', 'src', 'engine-process.ts');
  return new JsonLinesProcess(
    'test engine',
    'event',
    process.execPath,
    ['--import', 'tsx', script, socket, workerId],
    checkout,
    dirname(socket),
  );
}
