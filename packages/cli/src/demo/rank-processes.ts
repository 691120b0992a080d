// Starts the demo's ranks as separate OS processes (a decode worker of TP 2, a prefill worker of TP 1),
// follows what each reports, and stops them with SIGTERM, collecting each process's drain report.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Settings } from '../settings/all-settings.js';
import type { Backend, MemoryKind } from '@kvreuse/native-bindings';
import type { Geometry } from '@kvreuse/descriptors';
import { DemoProcessError } from '../errors.js';
import { DemoRank, type DemoRankOptions } from './demo-rank.js';
import {
  type DrainSummary,
  drainSummary,
  encodeRankCommand,
  encodeRankMessage,
  failure,
  parseRankCommand,
  parseRankMessage,
  type RankCommand,
  type RankMessage,
  type RankRole,
} from './rank-messages.js';

export interface RankSpec {
  readonly role: RankRole;
  readonly workerId: string;
  readonly tpRank: number;
  readonly tpSize: number;
  /** The demo's other worker, whose ranks this one sends to or reads from. */
  readonly peerWorkerId: string;
  /** The KV geometry of the rank's banks (default Qwen3-0.6B's). */
  readonly geometry?: Geometry;
}

export interface RankProcessesOptions {
  readonly ranks: readonly RankSpec[];
  readonly backend: Backend;
  /** Blocks per bank. */
  readonly blocks: number;
  /** The resolved settings every rank runs with (the parent resolved and validated them); `discovery` names the store they publish to. */
  readonly settings: Settings;
  /** The native library every rank loads: the one the parent loaded for `transport.library` (default: the default one). */
  readonly libraryPath?: string;
  /** How long every rank gets to become ready; a rank that takes longer fails the start. */
  readonly readyTimeoutMs: number;
  /** Where every rank's banks are: host memory (default), or GPU memory (GPU reuse admitted). */
  readonly memory?: MemoryKind;
  /** Variables added to every rank process's environment (say `UCX_TLS`); this process's own are left alone. */
  readonly env?: Readonly<Record<string, string>>;
  readonly onMessage?: (rank: RankSpec, message: RankMessage) => void;
}

export interface RankProcess {
  readonly spec: RankSpec;
  readonly pid: number;
  readonly messages: readonly RankMessage[];
}

export interface RankDrain {
  readonly process: string;
  readonly pid: number;
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** What the process reported after its drain; absent when it died without reporting. */
  readonly drain?: DrainSummary;
}

const label = (spec: RankSpec): string => `${spec.workerId}/tp${spec.tpRank}`;

// From the sources (tests, tsx) the rank process runs through tsx; from dist it is plain JavaScript.
const self = fileURLToPath(import.meta.url);
const fromSource = self.endsWith('.ts');
const entry = join(dirname(self), `rank-process.${fromSource ? 'ts' : 'js'}`);
const nodeArgs = fromSource ? ['--conditions=@kvreuse/source', '--import', 'tsx'] : [];

interface Tracked {
  readonly spec: RankSpec;
  readonly pid: number;
  readonly messages: RankMessage[];
  readonly stderr: string[];
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  readonly listeners: Set<(message: RankMessage) => void>;
  readonly running: () => boolean;
  readonly deliver: (command: RankCommand) => void;
  readonly terminate: (signal: 'SIGTERM' | 'SIGKILL') => void;
}

type Exit = { code: number | null; signal: string | null };

/** The tracking both hosts share: messages recorded and handed to the listeners. */
function tracking(
  spec: RankSpec,
  options: RankProcessesOptions,
  host: Omit<Tracked, 'spec' | 'messages' | 'stderr' | 'listeners'>,
): { tracked: Tracked; receive: (line: string) => void } {
  const tracked: Tracked = { spec, messages: [], stderr: [], listeners: new Set(), ...host };
  const receive = (line: string): void => {
    let message: RankMessage | undefined;
    try {
      message = parseRankMessage(line);
    } catch (error) {
      message = { type: 'failed', role: spec.role, tpRank: spec.tpRank, message: (error as Error).message };
    }
    if (message === undefined) return;
    tracked.messages.push(message);
    options.onMessage?.(spec, message);
    for (const listener of tracked.listeners) listener(message);
  };
  return { tracked, receive };
}

/** The metrics port of the `index`-th rank: `endpoint.metricsPort` for the first, the next port for each next one; none when it is 0. */
function metricsPortOf(settings: Settings, index: number): { metricsPort?: number } {
  const first = settings.endpoint.metricsPort;
  return first === 0 ? {} : { metricsPort: first + index };
}

function rankOptions(
  spec: RankSpec,
  index: number,
  options: RankProcessesOptions,
  incarnation: string,
): DemoRankOptions {
  const { role, workerId, tpRank, tpSize, peerWorkerId, geometry } = spec;
  const library = options.libraryPath === undefined ? {} : { libraryPath: options.libraryPath };
  return {
    role,
    workerId,
    incarnation,
    tpRank,
    tpSize,
    peerWorkerId,
    backend: options.backend,
    blocks: options.blocks,
    settings: options.settings,
    ...library,
    ...metricsPortOf(options.settings, index),
    ...(geometry === undefined ? {} : { geometry }),
    ...(options.memory === undefined ? {} : { memory: options.memory }),
  };
}

/** A rank as its own OS process (rank-process.ts), commands on its stdin, messages on its stdout. */
function spawnRank(spec: RankSpec, index: number, options: RankProcessesOptions, incarnation: string): Tracked {
  const child = spawn(
    process.execPath,
    [...nodeArgs, entry, JSON.stringify(rankOptions(spec, index, options, incarnation))],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env },
    },
  );
  // A rank killed mid-write closes its end of the pipe: that is its exit's news, not an error here.
  child.stdin?.on('error', () => undefined);
  const { tracked, receive } = tracking(spec, options, {
    pid: child.pid as number,
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
    running: () => child.exitCode === null && child.signalCode === null,
    deliver: (command) => child.stdin?.write(encodeRankCommand(command)),
    terminate: (signal) => child.kill(signal),
  });
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', receive);
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (line) => {
    tracked.stderr.push(line);
    if (tracked.stderr.length > 20) tracked.stderr.shift();
  });
  return tracked;
}

/**
 * A rank in this process (loopback agents reach only agents of their own process), through the same
 * codec. SIGTERM is its drain and shutdown; SIGKILL is the nearest one process can come to a crash:
 * the rank stops without a drain, its agent closes under its readers (`DemoRank.crash`).
 */
function hostRank(spec: RankSpec, index: number, options: RankProcessesOptions, incarnation: string): Tracked {
  let exit!: (outcome: Exit) => void;
  const exited = new Promise<Exit>((resolve) => (exit = resolve));
  let running = true;
  const ended = (outcome: Exit): void => {
    running = false;
    exit(outcome);
  };
  let receive: (line: string) => void = () => undefined;
  const say = (message: object): void =>
    receive(encodeRankMessage({ role: spec.role, tpRank: spec.tpRank, ...message } as RankMessage));
  const fail = (error: unknown): void => say(failure(error));
  const opening = DemoRank.open(rankOptions(spec, index, options, incarnation), say, {
    crash: () => terminate('SIGKILL'),
  });
  const published = opening.then(async (rank) => {
    await rank.reportReady();
    return rank;
  });
  published.catch((error: unknown) => {
    fail(error);
    ended({ code: 1, signal: null });
  });
  function terminate(signal: 'SIGTERM' | 'SIGKILL'): void {
    void opening
      .then(async (rank) => {
        if (signal === 'SIGKILL') {
          await rank.crash();
          ended({ code: null, signal });
          return;
        }
        const result = await rank.close();
        say({ type: 'drained', drain: drainSummary(result.report, result.agentDestroyed) });
        ended({ code: result.retained ? 1 : 0, signal: null });
      })
      .catch(fail);
  }
  const hosted = tracking(spec, options, {
    pid: process.pid,
    exited,
    running: () => running,
    deliver: (command) => {
      const line = encodeRankCommand(command).trimEnd();
      void published.then((rank) => rank.handle(parseRankCommand(line))).catch(fail);
    },
    terminate,
  });
  receive = hosted.receive;
  return hosted.tracked;
}

/**
 * Resolves with the first message of `type` from the `from`-th message on, or rejects when the process
 * reports a failure or exits first, or the time runs out.
 */
function waitForMessage<T extends RankMessage['type']>(
  tracked: Tracked,
  type: T,
  timeoutMs: number,
  from = 0,
): Promise<Extract<RankMessage, { type: T }>> {
  const seen = tracked.messages.slice(from).find((message) => message.type === type || message.type === 'failed');
  if (seen?.type === 'failed')
    return Promise.reject(
      new DemoProcessError(label(tracked.spec), `failed before reporting "${type}": ${seen.message}`, tracked.stderr),
    );
  if (seen !== undefined) return Promise.resolve(seen as Extract<RankMessage, { type: T }>);
  return new Promise((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      tracked.listeners.delete(listener);
    };
    const listener = (message: RankMessage): void => {
      if (message.type === 'failed') {
        done();
        reject(
          new DemoProcessError(
            label(tracked.spec),
            `failed before reporting "${type}": ${message.message}`,
            tracked.stderr,
          ),
        );
        return;
      }
      if (message.type !== type) return;
      done();
      resolve(message as Extract<RankMessage, { type: T }>);
    };
    const timer = setTimeout(() => {
      done();
      reject(
        new DemoProcessError(label(tracked.spec), `did not report "${type}" within ${timeoutMs} ms`, tracked.stderr),
      );
    }, timeoutMs);
    tracked.listeners.add(listener);
    void tracked.exited.then(({ code, signal }) => {
      if (!tracked.listeners.has(listener)) return;
      done();
      reject(
        new DemoProcessError(
          label(tracked.spec),
          `exited (${signal ?? `code ${code}`}) before reporting "${type}"`,
          tracked.stderr,
        ),
      );
    });
  });
}

export class RankProcesses {
  readonly #tracked: Tracked[];

  private constructor(tracked: Tracked[]) {
    this.#tracked = tracked;
  }

  /** Starts every rank and resolves once all are published (`published` carries its region ids) and ready; if one fails, the others are stopped and the error names it. */
  static async start(options: RankProcessesOptions): Promise<RankProcesses> {
    const incarnations = new Map<string, string>();
    const tracked = options.ranks.map((spec, index) => {
      if (!incarnations.has(spec.workerId)) incarnations.set(spec.workerId, randomUUID());
      const incarnation = incarnations.get(spec.workerId) as string;
      return options.backend === 'loopback'
        ? hostRank(spec, index, options, incarnation)
        : spawnRank(spec, index, options, incarnation);
    });
    const processes = new RankProcesses(tracked);
    try {
      await Promise.all(
        tracked.flatMap((rank) => [
          waitForMessage(rank, 'published', options.readyTimeoutMs),
          waitForMessage(rank, 'ready', options.readyTimeoutMs),
        ]),
      );
    } catch (error) {
      await processes.stop();
      throw error;
    }
    return processes;
  }

  #find(workerId: string, tpRank: number): Tracked {
    const rank = this.#tracked.find(({ spec }) => spec.workerId === workerId && spec.tpRank === tpRank);
    if (rank === undefined) throw new DemoProcessError(`${workerId}/tp${tpRank}`, 'is not one of the demo ranks', []);
    return rank;
  }

  /** Sends `command` to one rank and resolves with its next `reply` message (rejects if it fails or exits first). */
  request<T extends RankMessage['type']>(
    workerId: string,
    tpRank: number,
    command: RankCommand,
    reply: T,
    timeoutMs: number,
  ): Promise<Extract<RankMessage, { type: T }>> {
    const answer = this.next(workerId, tpRank, reply, timeoutMs);
    this.send(workerId, tpRank, command);
    return answer;
  }

  /** Resolves with the rank's next `type` message from now on (rejects if it fails or exits first). */
  next<T extends RankMessage['type']>(
    workerId: string,
    tpRank: number,
    type: T,
    timeoutMs: number,
  ): Promise<Extract<RankMessage, { type: T }>> {
    const rank = this.#find(workerId, tpRank);
    return waitForMessage(rank, type, timeoutMs, rank.messages.length);
  }

  /** Sends `command` to one rank, expecting no answer. */
  send(workerId: string, tpRank: number, command: RankCommand): void {
    this.#find(workerId, tpRank).deliver(command);
  }

  /** Resolves once the rank's process has exited. */
  async exited(workerId: string, tpRank: number): Promise<{ code: number | null; signal: string | null }> {
    return this.#find(workerId, tpRank).exited;
  }

  get ranks(): readonly RankProcess[] {
    return this.#tracked.map(({ spec, pid, messages }) => ({ spec, pid, messages }));
  }

  /** Signals one rank: SIGKILL (no drain: what a crash looks like to the others) or SIGTERM (its drain and shutdown). */
  kill(workerId: string, tpRank: number, signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): void {
    this.#find(workerId, tpRank).terminate(signal);
  }

  /** SIGTERM to every rank still running; resolves with each process's drain report (or how it ended without one). */
  async stop(): Promise<RankDrain[]> {
    return Promise.all(
      this.#tracked.map(async (rank) => {
        if (rank.running()) rank.terminate('SIGTERM');
        const { code, signal } = await rank.exited;
        const drained = rank.messages.find((message) => message.type === 'drained');
        return {
          process: label(rank.spec),
          pid: rank.pid,
          exitCode: code,
          signal,
          ...(drained?.type === 'drained' ? { drain: drained.drain } : {}),
        };
      }),
    );
  }
}
