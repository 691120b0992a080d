// One chaos run: the demo's decode worker (TP 2) and prefill worker (TP 1) as real rank processes over
// UCX, discovery in SQLite (or in an etcd of the run's own for `restart-etcd`); the decode ranks retain a
// demo-sized prefix, the prefill pulls it, and the scenario's fault strikes during the pull. Then the
// invariants are checked on what the processes report: see `docs/chaos.md`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { defaultSettings, type Settings } from '@kvreuse/cli';
import {
  DemoProcessError,
  type HintLine,
  type PullReport,
  RankProcesses,
  type RankDrain,
  type RankSpec,
} from '@kvreuse/cli/internal';
import {
  ClusterSecret,
  type DiscoveryStore,
  openDiscovery,
  watchWorkerReadiness,
  type WorkerReadiness,
  type WorkerReadinessWatch,
} from '@kvreuse/discovery';
import Database from 'better-sqlite3';
import { ChaosHangError, ChaosInvariantError, ChaosSetupError } from './errors.js';
import { EtcdProcess } from './etcd-process.js';
import { freePortRun } from './free-ports.js';
import { checkQuarantines } from './quarantines.js';
import { untilReading } from './reading.js';
import type { Scenario, Victim } from './scenario.js';
import { untilStopped } from './stopped.js';

const decodeId = 'chaos-decode';
const prefillId = 'chaos-prefill';
const ranks: readonly RankSpec[] = [
  { role: 'decode', workerId: decodeId, tpRank: 0, tpSize: 2, peerWorkerId: prefillId },
  { role: 'decode', workerId: decodeId, tpRank: 1, tpSize: 2, peerWorkerId: prefillId },
  { role: 'prefill', workerId: prefillId, tpRank: 0, tpSize: 1, peerWorkerId: decodeId },
];
const workerOf = (victim: Victim): string => (victim.role === 'decode' ? decodeId : prefillId);

/** The demo's pull: 42 blocks of Qwen3-0.6B (308 MB across both decode ranks). */
export const demoPrefixBlocks = 42;

/**
 * Short deadlines, so that a stopped peer reaches them within a run: an operation times out after 1 s
 * and is abandoned (quarantined, its banks retained) after 2 s; a lease lapses after 5 s (3 s lapsed
 * leases of ranks whose event loop a loaded machine held up, and failed their start).
 */
export const chaosTransport = {
  operationTimeoutMs: 1_000,
  abandonTimeoutMs: 2_000,
  shutdownDeadlineMs: 4_000,
} as const;
const leaseTtlMs = 5_000;

/** How a run ended. */
export type PullOutcome =
  /** Every block pulled and verified byte for byte. */
  | 'verified-full'
  /** A verified prefix committed, the rest recomputed with its reasons. */
  | 'verified-partial'
  /** Nothing committed: every block recomputed, with its reasons. */
  | 'recomputed'
  /** The pull refused or failed with a typed error, reported by the prefill. */
  | 'typed-failure'
  /** The prefill itself was killed before it reported. */
  | 'destination-killed';

export interface RunResult {
  readonly scenario: Scenario;
  readonly outcome: PullOutcome;
  /** What the run saw, one clause each: the pull, readiness after the fault, the survivors' quarantines and drains. */
  readonly evidence: readonly string[];
  /** Operations the survivors quarantined (past their abandon deadline unfinished), and the banks those quarantines held back. */
  readonly quarantine: { readonly operations: number; readonly banksRetained: number };
  readonly ms: number;
}

export interface RunOptions {
  /** The bound on every step (start, pull, readiness, drain): one that takes longer is a hang. */
  readonly stepTimeoutMs?: number;
  /** Blocks of the pulled prefix (default: the demo's 42). */
  readonly blocks?: number;
}

/** `promise`, or ChaosHangError naming `step` once `timeoutMs` has passed. */
async function bounded<T>(seed: number, step: string, timeoutMs: number, promise: Promise<T>): Promise<T> {
  const timer = new AbortController();
  const timeout = delay(timeoutMs, undefined, { signal: timer.signal }).then(
    () => Promise.reject(new ChaosHangError(seed, step, timeoutMs)),
    () => new Promise<never>(() => undefined),
  );
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    timer.abort();
  }
}

/** The run's 16-hex-digit block hashes: the seed in the high half, so that no two runs share a block. */
function prefixHashes(seed: number, blocks: number): string[] {
  return Array.from({ length: blocks }, (_, i) =>
    ((BigInt(seed >>> 0) << 32n) | BigInt(i + 1)).toString(16).padStart(16, '0'),
  );
}

/** Follows one worker's readiness as discovery shows it, every change kept in order. */
class ReadinessLog {
  readonly seen: WorkerReadiness[] = [];
  readonly #waiters = new Set<() => void>();
  watch: WorkerReadinessWatch | undefined;

  static async follow(discovery: DiscoveryStore, workerId: string): Promise<ReadinessLog> {
    const log = new ReadinessLog();
    log.watch = await watchWorkerReadiness(discovery, workerId, {
      onChange: (readiness) => {
        log.seen.push(readiness);
        for (const waiter of log.#waiters) waiter();
      },
    });
    return log;
  }

  get current(): WorkerReadiness {
    return this.watch?.current as WorkerReadiness;
  }

  /** Resolves once the worker's readiness is `ready` (true or false), from the `from`-th change on. */
  until(ready: boolean, from = 0): Promise<WorkerReadiness> {
    return new Promise((resolve) => {
      const check = (): void => {
        const found = this.seen.slice(from).find((readiness) => readiness.ready === ready);
        if (found === undefined) return;
        this.#waiters.delete(check);
        resolve(found);
      };
      this.#waiters.add(check);
      check();
    });
  }
}

function hintOf(readiness: WorkerReadiness, hashes: readonly string[]): HintLine {
  if (!readiness.ready) throw new Error(`${readiness.workerId} is not ready`);
  return {
    workerId: readiness.workerId,
    incarnation: readiness.incarnation,
    epoch: readiness.epoch,
    start: 0,
    hashes,
    blockTokens: readiness.worker.geometry.blockTokens,
    linkClass: 'same-host',
    tier: 'host',
  };
}

/** The pull's outcome from what the prefill reported, and the invariant every committed byte is held to. */
function classifyPull(seed: number, report: PullReport): PullOutcome {
  if (!report.verified)
    throw new ChaosInvariantError(
      seed,
      'no unverified byte reported as success',
      `the pull committed ${report.blocks} blocks and the prefill found bytes in them that are not the source's`,
    );
  if (report.blocks + report.recomputed.blocks !== report.requested) {
    throw new ChaosInvariantError(
      seed,
      'every requested block committed or recomputed',
      `${report.blocks} committed + ${report.recomputed.blocks} recomputed of ${report.requested}`,
    );
  }
  if (report.blocks < report.requested && report.recomputed.reasons.length === 0) {
    throw new ChaosInvariantError(
      seed,
      'a shortfall names its reason',
      `${report.recomputed.blocks} blocks recomputed without a reason`,
    );
  }
  if (report.blocks === report.requested) return 'verified-full';
  return report.blocks > 0 ? 'verified-partial' : 'recomputed';
}

/** The pull as the prefill ended it: its report, a typed failure it reported, or its death. */
async function pullEnd(
  seed: number,
  pulled: Promise<{ pull: PullReport }>,
): Promise<{ outcome: PullOutcome; detail: string }> {
  try {
    const { pull } = await pulled;
    const outcome = classifyPull(seed, pull);
    return {
      outcome,
      detail: `${pull.blocks}/${pull.requested} blocks committed and verified${pull.recomputed.reasons.length === 0 ? '' : `, recomputed: ${pull.recomputed.reasons[0]}`}`,
    };
  } catch (error) {
    if (!(error instanceof DemoProcessError)) throw error;
    if (error.what.startsWith('exited')) return { outcome: 'destination-killed', detail: error.what };
    // A failure the prefill reported names the typed error it caught (`PullRefusedError: …`).
    const typed = /^failed before reporting "pulled": (\w+Error): /.exec(error.what);
    if (typed === null) throw new ChaosInvariantError(seed, 'a failed pull ends in a typed error', error.what);
    return { outcome: 'typed-failure', detail: error.what.slice('failed before reporting "pulled": '.length) };
  }
}

/** `stop-over-tcp` with the prefill as victim: its pull stops the prefill itself, right after posting its reads (`stopAfterPost`). */
const stopsAfterPost = (scenario: Scenario): boolean =>
  scenario.kind === 'stop-over-tcp' && scenario.victim?.role === 'prefill';

const decodeRanks: readonly Victim[] = [
  { role: 'decode', tpRank: 0 },
  { role: 'decode', tpRank: 1 },
];

/**
 * The prefill stopped with its reads in flight, in an order that leaves nothing to timing: the prefill
 * stops itself right after posting its reads; then both decode ranks are stopped, so no read can end
 * while it is stopped or when it resumes; after `forMs` the prefill resumes past both its deadlines and
 * the decode ranks resume once it has quarantined its reads (or its pull has ended). False when the pull
 * ended before posting any read.
 */
async function stopAfterPost(
  scenario: Scenario,
  processes: RankProcesses,
  pidOf: (target: Victim) => number,
  stopping: Promise<unknown>,
  pullEnded: Promise<unknown>,
  stepMs: number,
): Promise<boolean> {
  const { seed } = scenario;
  const posted = await Promise.race([
    stopping.then(() => true),
    pullEnded.then(
      () => false,
      () => false,
    ),
  ]);
  if (!posted) return false;
  const prefill = pidOf({ role: 'prefill', tpRank: 0 });
  await untilStopped(seed, 'the prefill stopping itself after its posts', prefill, stepMs);
  for (const decode of decodeRanks) process.kill(pidOf(decode), 'SIGSTOP');
  try {
    await delay(scenario.forMs);
    const quarantined = processes.next(prefillId, 0, 'quarantined', stepMs).catch(() => undefined);
    process.kill(prefill, 'SIGCONT');
    await bounded(
      seed,
      'the prefill quarantining its reads',
      stepMs,
      Promise.race([quarantined, pullEnded.catch(() => undefined)]),
    );
  } finally {
    for (const decode of decodeRanks) process.kill(pidOf(decode), 'SIGCONT');
  }
  return true;
}

/**
 * The fault itself; resolves once it is over (the victim resumed, etcd back, the lock released): true,
 * or false for a `stop-over-tcp` whose pull ended before the prefill was seen reading (nothing stopped).
 * `stopping` is the prefill's `stopping-after-post` when its pull asked for it.
 */
async function inject(
  scenario: Scenario,
  processes: RankProcesses,
  pullEnded: Promise<unknown>,
  stopping: Promise<unknown> | undefined,
  discovery: { etcd?: EtcdProcess; sqlitePath?: string },
  stepTimeoutMs: number,
): Promise<boolean> {
  const { kind, victim, forMs } = scenario;
  const pidOf = (target: Victim): number =>
    processes.ranks.find((rank) => rank.spec.workerId === workerOf(target) && rank.spec.tpRank === target.tpRank)
      ?.pid as number;
  const stop = async (target: Victim): Promise<true> => {
    const pid = pidOf(target);
    process.kill(pid, 'SIGSTOP');
    await delay(forMs);
    process.kill(pid, 'SIGCONT');
    return true;
  };
  switch (kind) {
    case 'kill-decode':
    case 'kill-prefill':
      processes.kill(workerOf(victim as Victim), (victim as Victim).tpRank, 'SIGKILL');
      return true;
    case 'stop-rank':
      return stop(victim as Victim);
    case 'stop-over-tcp': {
      if (stopping !== undefined) return stopAfterPost(scenario, processes, pidOf, stopping, pullEnded, stepTimeoutMs);
      const prefill = processes.ranks.find((rank) => rank.spec.workerId === prefillId);
      const published = prefill?.messages.find((message) => message.type === 'published');
      const metricsUrl = published?.type === 'published' ? published.metricsUrl : undefined;
      if (metricsUrl === undefined)
        throw new ChaosInvariantError(scenario.seed, 'the prefill serves its metrics', 'it published no metrics URL');
      return (await untilReading(scenario.seed, metricsUrl, pullEnded)) && stop(victim as Victim);
    }
    case 'restart-etcd':
      await discovery.etcd?.kill();
      await delay(forMs);
      await discovery.etcd?.restart(stepTimeoutMs);
      return true;
    case 'lock-sqlite': {
      // Another connection takes the write lock and holds it; every rank's lease renewal waits behind it.
      const db = new Database(discovery.sqlitePath as string, { timeout: stepTimeoutMs });
      try {
        db.exec('BEGIN IMMEDIATE');
        await delay(forMs);
        db.exec('COMMIT');
      } finally {
        db.close();
      }
      return true;
    }
  }
}

/**
 * The drains of the processes that were not killed: none crashed, and an operation that never became
 * terminal (quarantined) kept its banks: a drain that quarantined returned its agent and banks to no one.
 */
function checkDrains(seed: number, drains: readonly RankDrain[], killed: string | undefined): string[] {
  const evidence: string[] = [];
  for (const drain of drains) {
    if (drain.process === killed) {
      if (drain.signal !== 'SIGKILL')
        throw new ChaosInvariantError(
          seed,
          'the victim died of its SIGKILL',
          `${drain.process} ended with ${drain.signal ?? `code ${drain.exitCode}`}`,
        );
      continue;
    }
    if (drain.signal !== null || drain.drain === undefined) {
      throw new ChaosInvariantError(
        seed,
        'no survivor crashes',
        `${drain.process} ended by ${drain.signal ?? `code ${drain.exitCode}`} without a drain report`,
      );
    }
    const { quarantined, banksRetained, banksReturned, agentDestroyed, pins } = drain.drain;
    if (quarantined > 0 && (banksRetained === 0 || agentDestroyed)) {
      throw new ChaosInvariantError(
        seed,
        'banks touched by an unfinished operation stay retained',
        `${drain.process} quarantined ${quarantined} operations yet retained ${banksRetained} banks (agent destroyed: ${agentDestroyed})`,
      );
    }
    if (quarantined === 0 && (banksRetained !== 0 || drain.exitCode !== 0)) {
      throw new ChaosInvariantError(
        seed,
        'a drain with nothing unfinished hands every bank back',
        `${drain.process} retained ${banksRetained} banks, exit code ${drain.exitCode}`,
      );
    }
    evidence.push(
      `${drain.process} drained: ${banksReturned} returned, ${banksRetained} retained, ${quarantined} quarantined, pins ${pins.released} released/${pins.lapsed} lapsed`,
    );
  }
  return evidence;
}

/**
 * `stop-over-tcp` runs every rank over UCX's tcp transport alone: no reader maps the decode ranks' banks,
 * so each get is served by the source's own progress and lasts long enough for a stop to land in it. The
 * ranks serve their metrics, whose pull pins tell when the prefill is reading (reading.ts).
 */
async function overTcp(
  scenario: Scenario,
  settings: Settings,
): Promise<{ settings: Settings; env?: Record<string, string> }> {
  if (scenario.kind !== 'stop-over-tcp') return { settings };
  const metricsPort = await freePortRun(scenario.seed, ranks.length);
  return { settings: { ...settings, endpoint: { ...settings.endpoint, metricsPort } }, env: { UCX_TLS: 'tcp' } };
}

function discoverySettings(scenario: Scenario, dir: string, etcd: EtcdProcess | undefined): Settings['discovery'] {
  const base = { ...defaultSettings.discovery, leaseTtlMs };
  if (etcd === undefined) return { ...base, backend: 'sqlite', sqlitePath: join(dir, 'discovery.sqlite') };
  const secretFile = join(dir, 'cluster.secret');
  ClusterSecret.readOrCreate(secretFile);
  return { ...base, backend: 'etcd', etcdEndpoints: [etcd.url], secretFile };
}

const sourceNotReady = 'PullRefusedError: pull refused (source-not-ready)';
const prefillNotReady = 'PullRefusedError: pull refused (not-ready)';
/** The refusals a pull meets while the endpoints are still recomputing readiness after a fault. */
const notReadyYet = /^PullRefusedError: pull refused \((not-ready|source-not-ready)\)/;

/** What a pull from a killed rank's peer meets before the prefill's own view of discovery has lapsed the rank's part. */
const peerGone =
  /^PullRefusedError: pull refused \(source-unreachable\): .*kvt_peer_load failed with REMOTE_DISCONNECT: .* is gone\)$/;

/**
 * Pulls again from the worker that lost a rank until the prefill refuses with `source-not-ready`: its
 * own view of discovery lapses the killed rank's part a little after the parent's, and until then the
 * pull is refused loading the dead peer (`PullRefusedError`, `source-unreachable`), recomputes everything
 * (the peer it loaded before answers no pin), or is refused `not-ready` while the prefill's own readiness
 * recovers. Anything else, or no refusal within `stepMs`, breaks the invariant.
 */
async function pullUntilRefused(seed: number, running: RankProcesses, hint: HintLine, stepMs: number): Promise<string> {
  const until = performance.now() + stepMs;
  let peerLoads = 0;
  for (;;) {
    const refused = await bounded(
      seed,
      'second pull',
      2 * stepMs,
      pullEnd(seed, running.request(prefillId, 0, { type: 'pull', hint }, 'pulled', stepMs)),
    );
    if (refused.detail.startsWith(sourceNotReady))
      return `second pull refused (source-not-ready)${peerLoads === 0 ? '' : ` after ${peerLoads} pulls that met the dead peer or a prefill not ready`}`;
    const interim =
      refused.outcome === 'recomputed' || peerGone.test(refused.detail) || refused.detail.startsWith(prefillNotReady);
    if (!interim)
      throw new ChaosInvariantError(
        seed,
        'readiness is recomputed',
        `a second pull from the worker with a killed rank ended ${refused.outcome} (${refused.detail}), expected ${sourceNotReady}`,
      );
    if (performance.now() > until)
      throw new ChaosInvariantError(
        seed,
        'readiness is recomputed',
        `${stepMs} ms after the decode worker turned not ready the prefill still loads its dead peer: ${refused.detail}`,
      );
    peerLoads++;
    await delay(250);
  }
}

/**
 * Pulls again until both endpoints accept the pull: while one has not yet become ready again it is
 * refused with a typed `not-ready` or `source-not-ready`. An accepted pull is held to `classifyPull`
 * (it may still recompute, say when a first read from the reloaded peers outlasts the operation
 * timeout); any other failure, or refusals past `stepMs`, breaks the invariant.
 */
async function pullOnceReady(
  seed: number,
  running: RankProcesses,
  decode: ReadinessLog,
  hashes: readonly string[],
  stepMs: number,
): Promise<{ epoch: number; pulled: string }> {
  const until = performance.now() + stepMs;
  let refusals = 0;
  for (;;) {
    const hint = hintOf(
      await bounded(seed, 'decode worker ready after the fault', stepMs, decode.until(true, decode.seen.length - 1)),
      hashes,
    );
    const again = await bounded(
      seed,
      'second pull',
      2 * stepMs,
      pullEnd(seed, running.request(prefillId, 0, { type: 'pull', hint }, 'pulled', stepMs)),
    );
    if (again.outcome !== 'typed-failure') {
      const waited = refusals === 0 ? '' : ` after ${refusals} refused while not ready`;
      return { epoch: hint.epoch, pulled: `second pull accepted${waited}: ${again.outcome}, ${again.detail}` };
    }
    if (!notReadyYet.test(again.detail))
      throw new ChaosInvariantError(
        seed,
        'readiness is recomputed',
        `after the fault a second pull failed: ${again.detail}`,
      );
    if (performance.now() > until)
      throw new ChaosInvariantError(
        seed,
        'readiness is recomputed',
        `${stepMs} ms after the fault a pull is still refused: ${again.detail}`,
      );
    refusals++;
    await delay(250);
  }
}

/** What every step after the ranks' start needs: the scenario, its running ranks, the prefix they retain, and the bound on each step. */
interface Run {
  readonly scenario: Scenario;
  readonly running: RankProcesses;
  readonly hashes: readonly string[];
  readonly stepMs: number;
}

/** Starts every rank, with banks with room for the prefix and a little more, as the demo's. */
async function startRanks(
  scenario: Scenario,
  settings: Settings,
  blocks: number,
  stepMs: number,
): Promise<RankProcesses> {
  return bounded(
    scenario.seed,
    'rank start',
    stepMs,
    RankProcesses.start({
      ranks,
      backend: 'ucx',
      blocks: blocks + 6,
      readyTimeoutMs: stepMs,
      ...(await overTcp(scenario, settings)),
    }),
  ).catch((error: unknown) => {
    // Before any fault: the machine, not the fault, failed this run.
    throw error instanceof DemoProcessError ? new ChaosSetupError(scenario.seed, 'rank start', error.message) : error;
  });
}

/** Each decode rank computes the prefix's KV content into its banks and retains it. */
async function retainPrefix({ scenario, running, hashes, stepMs }: Run): Promise<void> {
  await bounded(
    scenario.seed,
    'retain',
    stepMs,
    Promise.all(
      [0, 1].map((tpRank) =>
        running.request(
          decodeId,
          tpRank,
          { type: 'retain', slots: [], hashes: [], append: hashes, publishInventory: false },
          'retained',
          stepMs,
        ),
      ),
    ),
  );
}

/** The prefill pulls the prefix from the decode worker as `before` saw it ready, and the scenario's fault strikes `atMs` into the pull: how the pull ended, and whether the fault struck. */
async function pullUnderFault(
  { scenario, running, hashes, stepMs }: Run,
  before: WorkerReadiness,
  discovery: { etcd?: EtcdProcess; sqlitePath?: string },
): Promise<[Awaited<ReturnType<typeof pullEnd>>, boolean]> {
  const forced = stopsAfterPost(scenario);
  const stopping = forced ? running.next(prefillId, 0, 'stopping-after-post', 2 * stepMs) : undefined;
  stopping?.catch(() => undefined);
  const pulled = running.request(
    prefillId,
    0,
    { type: 'pull', hint: hintOf(before, hashes), ...(forced ? { stopAfterPost: true } : {}) },
    'pulled',
    stepMs,
  );
  const pull = pullEnd(scenario.seed, pulled);
  const fault = delay(scenario.atMs).then(() => inject(scenario, running, pull, stopping, discovery, stepMs));
  return bounded(scenario.seed, 'pull and fault', 2 * stepMs, Promise.all([pull, fault]));
}

/** Readiness after the fault, as discovery recomputes it: a killed rank's worker turns not ready once its lease lapses. */
async function notReadyAfterKill(
  { scenario, stepMs }: Run,
  decode: ReadinessLog,
  prefill: ReadinessLog,
): Promise<string[]> {
  if (scenario.kind === 'kill-prefill') {
    const gone = await bounded(scenario.seed, 'prefill worker not ready', stepMs, prefill.until(false));
    return [`prefill not ready: ${gone.ready ? '' : gone.reasons[0]?.message}`];
  }
  if (scenario.kind === 'kill-decode') {
    const gone = await bounded(scenario.seed, 'decode worker not ready', stepMs, decode.until(false));
    return [`decode not ready: ${gone.ready ? '' : gone.reasons[0]?.message}`];
  }
  return [];
}

/**
 * Every survivor answers: each decode rank a no-op allocation; the prefill a second pull, which must
 * refuse a source whose worker lost a rank and, after any other fault, pull everything verified
 * once the endpoints are ready again.
 */
async function survivorsAnswer(
  run: Run,
  decode: ReadinessLog,
  before: WorkerReadiness,
  killed: string | undefined,
): Promise<string[]> {
  const { scenario, running, hashes, stepMs } = run;
  for (const tpRank of [0, 1]) {
    if (killed === `${decodeId}/tp${tpRank}`) continue;
    await bounded(
      scenario.seed,
      `${decodeId}/tp${tpRank} answers`,
      stepMs,
      running.request(decodeId, tpRank, { type: 'allocate', count: 0 }, 'allocated', stepMs),
    );
  }
  if (scenario.kind === 'kill-decode')
    return [await pullUntilRefused(scenario.seed, running, hintOf(before, hashes), stepMs)];
  if (scenario.kind === 'kill-prefill') return [];
  const again = await pullOnceReady(scenario.seed, running, decode, hashes, stepMs);
  const flapped = decode.seen.some((readiness) => !readiness.ready);
  return [`decode ready at epoch ${again.epoch}${flapped ? ' (not ready during the fault)' : ''}`, again.pulled];
}

/** The survivors' quarantines, each checked against its drain: their total, and a line of evidence for each survivor that quarantined. */
function tallyQuarantines(
  { scenario, running }: Run,
  drains: readonly RankDrain[],
  killed: string | undefined,
): { quarantine: RunResult['quarantine']; evidence: string[] } {
  const quarantine = { operations: 0, banksRetained: 0 };
  const evidence: string[] = [];
  for (const drain of drains.filter((survivor) => survivor.process !== killed)) {
    const rank = running.ranks.find(({ spec }) => `${spec.workerId}/tp${spec.tpRank}` === drain.process);
    const tally = checkQuarantines(scenario.seed, rank?.messages ?? [], drain);
    if (tally.operations === 0) continue;
    quarantine.operations += tally.operations;
    quarantine.banksRetained += tally.banksRetained;
    evidence.push(
      `${drain.process} quarantined ${tally.operations} operations (${tally.banksRetained} banks retained), ${tally.provenTerminal} proven terminal later`,
    );
  }
  return { quarantine, evidence };
}

/** Runs `scenario` to its end (every process and etcd stopped); throws ChaosHangError or ChaosInvariantError naming its seed. */
export async function runScenario(scenario: Scenario, options: RunOptions = {}): Promise<RunResult> {
  const { seed } = scenario;
  const stepMs = options.stepTimeoutMs ?? 60_000;
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'kvreuse-chaos-'));
  const etcd =
    scenario.kind === 'restart-etcd' ? await bounded(seed, 'etcd start', stepMs, EtcdProcess.start(stepMs)) : undefined;
  const discoveryOf = discoverySettings(scenario, dir, etcd);
  const settings: Settings = {
    ...defaultSettings,
    transport: { ...defaultSettings.transport, backend: 'ucx', ...chaosTransport },
    discovery: discoveryOf,
  };
  const discovery = openDiscovery(settings.discovery);
  let processes: RankProcesses | undefined;
  const logs: ReadinessLog[] = [];
  try {
    const blocks = options.blocks ?? demoPrefixBlocks;
    processes = await startRanks(scenario, settings, blocks, stepMs);
    const [decode, prefill] = await Promise.all([
      ReadinessLog.follow(discovery, decodeId),
      ReadinessLog.follow(discovery, prefillId),
    ]);
    logs.push(decode as ReadinessLog, prefill as ReadinessLog);
    const decodeLog = decode as ReadinessLog;
    const run: Run = { scenario, running: processes, hashes: prefixHashes(seed, blocks), stepMs };
    await retainPrefix(run);
    const before = await bounded(seed, 'decode ready', stepMs, decodeLog.until(true));
    const [ended, struck] = await pullUnderFault(run, before, {
      ...(etcd === undefined ? {} : { etcd }),
      sqlitePath: discoveryOf.sqlitePath,
    });
    const evidence = [
      `pull ${ended.outcome}: ${ended.detail}${struck ? '' : ' (it ended before the prefill was seen reading: nothing was stopped)'}`,
    ];
    const killed =
      scenario.kind === 'kill-decode' || scenario.kind === 'kill-prefill'
        ? `${workerOf(scenario.victim as Victim)}/tp${(scenario.victim as Victim).tpRank}`
        : undefined;
    evidence.push(...(await notReadyAfterKill(run, decodeLog, prefill as ReadinessLog)));
    evidence.push(...(await survivorsAnswer(run, decodeLog, before, killed)));

    const drains = await bounded(seed, 'drain', 2 * stepMs, run.running.stop());
    processes = undefined;
    const drained = checkDrains(seed, drains, killed);
    const quarantined = tallyQuarantines(run, drains, killed);
    evidence.push(...quarantined.evidence, ...drained);
    return {
      scenario,
      outcome: ended.outcome,
      evidence,
      quarantine: quarantined.quarantine,
      ms: performance.now() - started,
    };
  } finally {
    await cleanUp(processes, logs, discovery, etcd, stepMs);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** After a failed run: every rank resumed and stopped (SIGKILL if its drain does not end in time), watches and discovery closed, etcd stopped. */
async function cleanUp(
  processes: RankProcesses | undefined,
  logs: readonly ReadinessLog[],
  discovery: DiscoveryStore,
  etcd: EtcdProcess | undefined,
  stepMs: number,
): Promise<void> {
  if (processes !== undefined) {
    for (const rank of processes.ranks) {
      try {
        process.kill(rank.pid, 'SIGCONT');
      } catch {
        // already gone
      }
    }
    const stopping = processes.stop();
    const ended = await Promise.race([stopping.then(() => true), delay(2 * stepMs).then(() => false)]);
    if (!ended) for (const rank of processes.ranks) processes.kill(rank.spec.workerId, rank.spec.tpRank, 'SIGKILL');
  }
  for (const log of logs) await log.watch?.close().catch(() => undefined);
  await discovery.close().catch(() => undefined);
  await etcd?.stop();
}
