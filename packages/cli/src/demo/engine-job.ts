// `kvreuse demo --engine test`: the main job with an inference engine as its decode side. The checkout's
// test engine owns its KV memory and publishes vLLM's KV events on 127.0.0.1; a `kvreuse sidecar`
// adopts that memory and serves it; the router in this process is fed by the engine's events
// (EngineEventSubscriber → EngineInventoryFeed → the retained inventory), not by endpoint announcements;
// a prefill rank process pulls the prefix the router names from the sidecar, verified. Then everything
// stops, and the run says what it left behind: its temporary folder, and any process still running.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Geometry, Worker } from '@kvreuse/descriptors';
import { type DiscoveryStore, openDiscovery, watchWorkerReadiness } from '@kvreuse/discovery';
import { EngineEventSubscriber, EngineInventoryFeed } from '@kvreuse/engine-events';
import { blockHashScheme, RetainedInventory } from '@kvreuse/inventory';
import { RouterMetrics } from '@kvreuse/router';
import { DemoProcessError } from '../errors.js';
import type { DemoCalibration, DemoDecision, DemoDrainRow, DemoPull } from './demo-summary.js';
import { JsonLinesProcess, startSidecar, startTestEngine } from './engine-processes.js';
import { decideTurn2, type MainJobOptions, pullCommandOf, reportDrains, reportPull, runSettings } from './main-job.js';
import { type DemoPriors, demoPriors, priorLines, withPriors } from './priors.js';
import { RankProcesses } from './rank-processes.js';
import { readyWorker } from './ready-worker.js';

export interface EngineJobOptions extends MainJobOptions {
  /** The kvreuse checkout whose tools/test-engine runs as the engine. */
  readonly checkout: string;
}

export interface EngineDemoSummary {
  readonly engine: { readonly workerId: string; readonly incarnation: string; readonly events: string };
  /** What the router's inventory held of the engine, and where it came from: the engine's KV events. */
  readonly inventory: {
    readonly from: 'engine-events';
    readonly batches: number;
    readonly blocks: number;
    readonly gaps: number;
    readonly replays: number;
  };
  readonly priors: DemoPriors;
  readonly decisions: readonly DemoDecision[];
  readonly pull: (DemoPull & { readonly source: string }) | null;
  readonly calibration: DemoCalibration | null;
  readonly drain: readonly DemoDrainRow[];
  /** The sidecar's withdrawal of the engine's memory once the engine stopped. */
  readonly withdrawn: { readonly pinsRevoked: number; readonly banksReturned: number; readonly unmapped: boolean };
  /** What the run left behind once it stopped: its temporary folder (if it still exists) and its processes still running. */
  readonly leftBehind: { readonly tempFolder: string | null; readonly processes: readonly number[] };
}

const engineWorkerId = 'test-engine-0';
const prefillId = 'test-engine-prefill-0';
/** Blocks per bank of the prefill rank: room for the prefix. */
const bankBlocks = 48;
/** The conversation the engine holds: 42 blocks of its 16 tokens. */
const conversationBlocks = 42;
const vocabulary = 151_936;
const conversationToken = (i: number): number => (i * 7919 + 17) % vocabulary;

/** Resolves once the worker is ready in discovery (the sidecar published the engine's rank). */
async function untilReady(discovery: DiscoveryStore, workerId: string, timeoutMs: number): Promise<void> {
  let ready!: () => void;
  const becameReady = new Promise<void>((resolve) => (ready = resolve));
  const watch = await watchWorkerReadiness(discovery, workerId, { onChange: (r) => r.ready && ready() });
  if (watch.current.ready) ready();
  try {
    await within(becameReady, timeoutMs, workerId, 'was not ready');
  } finally {
    await watch.close();
  }
}

/** The router's inventory, fed by the engine's events; resolves `indexed` once it holds `blocks` of the engine's. */
function followEngine(
  endpoints: { endpoint: string; replayEndpoint: string },
  geometry: Geometry,
  settings: MainJobOptions['settings'],
  incarnation: string,
) {
  const inventory = new RetainedInventory();
  // The engine's blocks are announced under the incarnation the sidecar published it as: the router
  // pulls from that incarnation.
  const feed = new EngineInventoryFeed({
    inventory,
    scheme: blockHashScheme(geometry, settings.inventory.hashSeed),
    incarnationOf: () => incarnation,
  });
  let batches = 0;
  const waiting: { blocks: number; resolve: () => void; reject: (error: Error) => void }[] = [];
  const subscriber = new EngineEventSubscriber({
    ...endpoints,
    workerId: engineWorkerId,
    feed,
    onEvent: (event) => {
      if (event.kind === 'batch') batches += 1;
      if (event.kind === 'failed') {
        const error = new DemoProcessError('the router', `stopped following the engine's events: ${event.reason}`, []);
        for (const wait of waiting.splice(0)) wait.reject(error);
      }
      const held = feed.heldBlocks(engineWorkerId).host;
      for (const wait of waiting.splice(0))
        if (held >= wait.blocks) wait.resolve();
        else waiting.push(wait);
    },
  });
  const indexed = (blocks: number): Promise<void> =>
    new Promise((resolve, reject) => {
      if (feed.heldBlocks(engineWorkerId).host >= blocks) resolve();
      else waiting.push({ blocks, resolve, reject });
    });
  const counts = () => {
    const metrics = subscriber.metrics();
    return { batches, blocks: feed.heldBlocks(engineWorkerId).host, gaps: metrics.gaps, replays: metrics.replays };
  };
  return { inventory, subscriber, indexed, counts };
}

/** Rejects with DemoProcessError naming `what` when `promise` takes longer than `timeoutMs`. */
async function within<T>(promise: Promise<T>, timeoutMs: number, who: string, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DemoProcessError(who, `${what} within ${timeoutMs} ms`, [])), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** What runs, for the shutdown to stop whatever got started. */
interface Running {
  discovery?: DiscoveryStore;
  sidecar?: JsonLinesProcess;
  engine?: JsonLinesProcess;
  prefill?: RankProcesses | undefined;
  subscriber?: EngineEventSubscriber;
}

/** Stops what still runs: the prefill drained, the engine and its sidecar ended, the subscriber and discovery closed. */
async function stopRunning(running: Running): Promise<void> {
  await running.subscriber?.close();
  await running.prefill?.stop();
  for (const child of [running.engine, running.sidecar]) {
    if (child?.running) child.child.kill('SIGTERM');
    await child?.exited;
  }
  await running.discovery?.close();
}

interface DecodeSide {
  readonly geometry: Geometry;
  readonly incarnation: string;
  readonly endpoints: { readonly endpoint: string; readonly replayEndpoint: string };
}

/** The sidecar, listening on a socket in `dir`; the engine, its memory adopted by it and published as a ready worker. */
async function startDecodeSide(
  settings: MainJobOptions['settings'],
  dir: string,
  options: EngineJobOptions,
  running: Running,
  timeoutMs: number,
): Promise<DecodeSide> {
  const { progress } = options;
  const socket = join(dir, 'engine.sock');
  running.sidecar = await startSidecar(settings, socket, options.capabilities.libraryPath, timeoutMs);
  progress(`  kvreuse sidecar (pid ${running.sidecar.child.pid}) listens on ${socket}`);
  running.engine = startTestEngine(options.checkout, socket, engineWorkerId);
  const open = await running.engine.next('open', timeoutMs);
  const endpoints = { endpoint: String(open['endpoint']), replayEndpoint: String(open['replayEndpoint']) };
  progress(
    `  test engine (pid ${running.engine.child.pid}) owns its KV memory (a memfd) and publishes vLLM KV events at ${endpoints.endpoint} (replay ${endpoints.replayEndpoint})`,
  );
  const { answer } = await running.engine.next('adopted', timeoutMs);
  const incarnation = String((answer as { incarnation: unknown }).incarnation);
  const adopted = await running.sidecar.next('adopted', timeoutMs);
  progress(
    `  the sidecar adopted its memory: ${adopted['banks']} bank(s) of ${engineWorkerId} (incarnation ${incarnation}, epoch ${adopted['epoch']})`,
  );
  await untilReady(running.discovery as DiscoveryStore, engineWorkerId, timeoutMs);
  return { geometry: open['geometry'] as Geometry, incarnation, endpoints };
}

/** The prefill rank, with the engine's geometry: it reads the engine's blocks. */
function startPrefill(
  settings: MainJobOptions['settings'],
  geometry: Geometry,
  options: EngineJobOptions,
  timeoutMs: number,
) {
  const rank = {
    role: 'prefill',
    workerId: prefillId,
    tpRank: 0,
    tpSize: 1,
    peerWorkerId: engineWorkerId,
    geometry,
  } as const;
  options.progress(
    `starting ${prefillId}/tp0 as an OS process (${options.backend}, SQLite discovery at ${settings.discovery.sqlitePath})`,
  );
  return RankProcesses.start({
    ranks: [rank],
    backend: options.backend,
    blocks: bankBlocks,
    settings,
    ...(options.capabilities.libraryPath === undefined ? {} : { libraryPath: options.capabilities.libraryPath }),
    readyTimeoutMs: timeoutMs,
    onMessage: (_rank, message) => {
      if (message.type === 'ready') options.progress(`  ${prefillId}/tp0 ready`);
    },
  });
}

/** The engine stopped (SIGTERM): the sidecar withdraws its memory and ends. */
async function stopDecodeSide(running: Running, progress: (line: string) => void, timeoutMs: number) {
  const engine = running.engine as JsonLinesProcess;
  const sidecar = running.sidecar as JsonLinesProcess;
  engine.child.kill('SIGTERM');
  await engine.exited;
  const report = await sidecar.next('withdrawn', timeoutMs);
  await sidecar.exited;
  const withdrawn = {
    pinsRevoked: Number(report['pinsRevoked']),
    banksReturned: Number(report['banksReturned']),
    unmapped: report['unmapped'] === true,
  };
  progress(
    `  test engine stopped; the sidecar withdrew its memory: ${withdrawn.pinsRevoked} pins revoked, ${withdrawn.banksReturned} bank(s) returned, ${withdrawn.unmapped ? 'unmapped' : 'still mapped'}; the sidecar ended`,
  );
  return withdrawn;
}

const stillRunning = (pid: number | undefined): boolean => {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The engine holds the conversation; the router's inventory indexes it from the engine's events. */
async function storeConversation(
  running: Running,
  followed: ReturnType<typeof followEngine>,
  blockTokens: number,
  options: EngineJobOptions,
  timeoutMs: number,
): Promise<number[]> {
  const conversation = Array.from({ length: conversationBlocks * blockTokens }, (_, i) => conversationToken(i));
  const engine = running.engine as JsonLinesProcess;
  engine.send({ tokens: conversation });
  const stored = Number((await engine.next('stored', timeoutMs))['blocks']);
  await within(
    followed.indexed(stored),
    timeoutMs,
    'the router',
    `indexed no ${stored} blocks from the engine's events`,
  );
  const { batches, blocks, gaps, replays } = followed.counts();
  options.progress(
    `turn 1: the engine holds the conversation's ${stored} blocks; the router's inventory indexed ${blocks} from ${batches} event batch(es) (gaps ${gaps}, replays ${replays}), not from endpoint announcements`,
  );
  return conversation;
}

/** Turn 2 routed on the event-fed inventory, and the prefill's pull from the sidecar when the router says pull. */
async function routeAndPull(
  settings: MainJobOptions['settings'],
  running: Running,
  followed: ReturnType<typeof followEngine>,
  conversation: readonly number[],
  options: EngineJobOptions,
  timeoutMs: number,
): Promise<Pick<EngineDemoSummary, 'priors' | 'decisions' | 'pull' | 'calibration'>> {
  const { progress } = options;
  const discovery = running.discovery as DiscoveryStore;
  const workers = {
    decode: await readyWorker(discovery, engineWorkerId),
    prefill: await readyWorker(discovery, prefillId),
  };
  // No hand-off measured a link here: the router prices with the settings' priors.
  const priors = demoPriors(settings, { blockUs: true, prefillTokenUs: true }, { blocks: 1, ms: 0 }, undefined);
  for (const line of priorLines(priors)) progress(line);
  const routed = withPriors(settings, priors);
  const metrics = new RouterMetrics();
  const { pullDecision, decisions, router } = await decideTurn2(
    discovery,
    followed.inventory,
    routed,
    { ...options, metrics },
    workers,
    conversation,
    progress,
    true,
  );
  for (const decision of decisions)
    if (decision.action !== 'pull') options.requestServed?.(decision.request, decision, null);
  if (pullDecision.action !== 'pull') {
    progress('pull: none, the router recomputes turn 2');
    return { priors, decisions, pull: null, calibration: null };
  }
  progress(
    `pull: ${prefillId} pulls ${pullDecision.extent} blocks from the sidecar serving ${engineWorkerId}'s own memory, checksums verified: ${settings.endpoint.verify} (endpoint.verify)`,
  );
  const command = { ...pullCommandOf(pullDecision, routed), engineContent: true };
  const pulled = await (running.prefill as RankProcesses).request(prefillId, 0, command, 'pulled', timeoutMs);
  options.requestServed?.(decisions[0]!.request, decisions[0]!, pulled.pull);
  const { pull, calibration } = reportPull(router, pullDecision, pulled.pull, progress);
  return { priors, decisions, pull: { ...pull, source: engineWorkerId }, calibration };
}

/** Runs the main job with the test engine as its decode side to its end (every process stopped), and returns its summary. */
export async function runEngineJob(options: EngineJobOptions): Promise<EngineDemoSummary> {
  const { progress } = options;
  const timeoutMs = options.stepTimeoutMs ?? 120_000;
  // The run's files (its SQLite discovery, the cluster secret, the sidecar's socket) in a folder of its own (mkdtemp: 0700).
  const dir = mkdtempSync(join(tmpdir(), 'kvreuse-demo-'));
  const running: Running = {};
  let closing: Promise<void> | undefined;
  const closeAll = (): Promise<void> =>
    (closing ??= stopRunning(running).finally(() => rmSync(dir, { recursive: true, force: true })));
  const takeBack = options.whenInterrupted?.(closeAll) ?? (() => undefined);
  try {
    const settings = runSettings(options.settings, dir);
    running.discovery = openDiscovery(settings.discovery);
    progress(`starting the decode side: the checkout's test engine and a kvreuse sidecar (${options.backend})`);
    const side = await startDecodeSide(settings, dir, options, running, timeoutMs);
    running.prefill = await startPrefill(settings, side.geometry, options, timeoutMs);
    const followed = followEngine(side.endpoints, side.geometry, settings, side.incarnation);
    running.subscriber = followed.subscriber;
    const conversation = await storeConversation(running, followed, side.geometry.blockTokens, options, timeoutMs);
    const routed = await routeAndPull(settings, running, followed, conversation, options, timeoutMs);
    const inventory = { from: 'engine-events' as const, ...followed.counts() };

    progress('shutdown: SIGTERM to the prefill rank, then to the engine');
    const drain = reportDrains(await running.prefill.stop(), progress);
    const pids = [
      running.engine?.child.pid,
      running.sidecar?.child.pid,
      ...running.prefill.ranks.map((rank) => rank.pid),
    ];
    running.prefill = undefined;
    const withdrawn = await stopDecodeSide(running, progress, timeoutMs);
    await closeAll();
    const leftBehind = {
      tempFolder: existsSync(dir) ? dir : null,
      processes: pids.filter(stillRunning) as number[],
    };
    progress(
      `left behind: ${leftBehind.tempFolder === null ? `nothing in the temporary folder (${dir} removed)` : `${dir} still exists`}; ` +
        `${leftBehind.processes.length === 0 ? 'no process' : `processes ${leftBehind.processes.join(', ')}`} still running`,
    );
    const engine = { workerId: engineWorkerId, incarnation: side.incarnation, events: side.endpoints.endpoint };
    return { engine, inventory, ...routed, drain, withdrawn, leftBehind };
  } finally {
    takeBack();
    await closeAll();
  }
}

/** The last line without `--json`. */
export function engineSummaryLine(summary: EngineDemoSummary): string {
  const { pull, inventory, leftBehind } = summary;
  const pulled =
    pull === null
      ? 'no pull'
      : `pulled ${pull.blocks} blocks from ${pull.source}'s own memory (${pull.checkedBlocks} checksums compared, ${pull.verified ? 'verified' : 'NOT verified'}) in ${pull.ms.toFixed(1)} ms`;
  const clean = leftBehind.tempFolder === null && leftBehind.processes.length === 0;
  return (
    `kvreuse demo --engine test: router fed by ${inventory.blocks} blocks of engine events; ` +
    `${summary.decisions.map((d) => `${d.request} ${d.action} (${d.reason})`).join(', ')}; ${pulled}; ` +
    `engine withdrawn (${summary.withdrawn.pinsRevoked} pins revoked); ${clean ? 'nothing left behind' : 'LEFT BEHIND: ' + JSON.stringify(leftBehind)}`
  );
}
