// The main job, in the parent: starts a decode worker of TP 2 and a prefill worker of TP 1 as OS
// processes, hands turn 1 off from prefill to decode with WRITEs, routes turn 2 (and a request too
// short to be worth it) with the router on discovery and the retained inventory, has the prefill rank
// pull and verify the 42-block prefix, shows GPU reuse as profile admission decides it (admitted, every
// rank's banks are in GPU memory, and the pull moves and verifies them there) and a decode rank killed
// mid-pull — the other decode rank then stopped with SIGTERM while the prefill still holds its pin
// there, so its drain waits for the pin —, then stops everything with SIGTERM and collects each process's
// drain report (the pins each waited for, and how each ended). The
// pull verifies as `endpoint.verify` says, and its receipt calibrates the router, which decides turn 2
// again on what the pull measured; with `endpoint.metrics_port` set every rank serves its metrics.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kvreuseSettings, type Settings } from '../settings/all-settings.js';
import type { Worker } from '@kvreuse/descriptors';
import type { Backend, Capabilities, MemoryKind } from '@kvreuse/native-bindings';
import { declaredProfile, explainActivation } from '@kvreuse/profile-admission';
import {
  ClusterSecret,
  type DiscoveryStore,
  openDiscovery,
  type ReadinessGate,
  watchWorkerReadiness,
} from '@kvreuse/discovery';
import {
  blockHashScheme,
  blockHashToHex,
  followInventory,
  hashBlockChain,
  RetainedInventory,
} from '@kvreuse/inventory';
import {
  decide,
  type PullHint,
  type RouteContext,
  type RouteDecision,
  type RouteRequest,
  RouterMetrics,
  SourceBook,
  TransferCalibration,
} from '@kvreuse/router';
import { listenMetrics, type MetricsListener } from '@kvreuse/endpoint';
import { DemoProcessError } from '../errors.js';
import type { WhenInterrupted } from '../interrupts.js';
import {
  type DemoCalibration,
  type DemoDecision,
  type DemoPull,
  type DemoSummary,
  drainRow,
  pullSummary,
} from './demo-summary.js';
import { hintLine, type PullReport, type RankMessage } from './rank-messages.js';
import { RankProcesses, type RankSpec } from './rank-processes.js';
import { type Compute, type DemoPriors, demoPriors, priorLines, thisMachine, withPriors } from './priors.js';
import { readyWorker } from './ready-worker.js';
import { warmUpRouter } from './router-warm-up.js';
import { bankMemory, demoGpu, vramAdmissionGate } from './vram-banks.js';

export interface MainJobOptions {
  readonly settings: Settings;
  readonly capabilities: Capabilities;
  readonly backend: Backend;
  /** Each line of progress, as it happens. */
  readonly progress: (line: string) => void;
  /** Each request once it is served: the router's decision, and the prefill's receipt when it pulled (null when it recomputed without one). */
  readonly requestServed?: (request: string, decision: DemoDecision, receipt: PullReport | null) => void;
  /**
   * Every lookup runs to its end (`kvreuse demo --unbounded-lookup`): the router's lookup clock never
   * advances, and the router is not warmed up first, as no cold lookup can spend the budget then.
   */
  readonly unboundedLookup?: boolean;
  /** How long each rank gets to start, and each step to answer. */
  readonly stepTimeoutMs?: number;
  /** The router's priors the settings give (by a flag, a variable or a settings file): those the run keeps instead of measuring. */
  readonly givenPriors?: { readonly blockUs: boolean; readonly prefillTokenUs: boolean };
  /** The compute the recompute prior is derived from (default: this machine's cores and clock). */
  readonly compute?: Compute | undefined;
  /** After its steps, the job keeps its processes serving until this resolves with what ended the hold (`kvreuse demo --hold`: a signal's name). */
  readonly hold?: () => Promise<string>;
  /** Where the job registers its own shutdown, to run if the process is interrupted (the CLI's SIGINT/SIGTERM handling). */
  readonly whenInterrupted?: WhenInterrupted;
}

const decodeId = 'qwen3-0.6b-decode-0';
const prefillId = 'qwen3-0.6b-prefill-0';
const ranks: readonly RankSpec[] = [
  { role: 'decode', workerId: decodeId, tpRank: 0, tpSize: 2, peerWorkerId: prefillId },
  { role: 'decode', workerId: decodeId, tpRank: 1, tpSize: 2, peerWorkerId: prefillId },
  { role: 'prefill', workerId: prefillId, tpRank: 0, tpSize: 1, peerWorkerId: decodeId },
];
/** The demo's processes: with `endpoint.metrics_port` set, each rank serves its metrics on a port of its own, from that one up, and this one (its router's) on the next. */
export const demoProcesses = ranks.length + 1;

/** Turn 1: the prompt the prefill computes and hands off, and the blocks decoding appends; 42 stay retained. */
export const handedOffBlocks = 40;
export const appendedBlocks = 2;
export const retainedBlocks = handedOffBlocks + appendedBlocks;
/** Blocks per bank on every rank: room for the retained prefix and a little more. */
const bankBlocks = 48;
/** The short request shares this many leading blocks (a system prompt) with the conversation. */
const sharedSystemBlocks = 2;

const vocabulary = 151_936;
const conversationToken = (i: number): number => (i * 7919 + 17) % vocabulary;
const otherToken = (i: number): number => (i * 104_729 + 3) % vocabulary;

const hex = (hashes: ArrayLike<bigint>): string[] => Array.from(hashes, blockHashToHex);
const ms = (value: number): string => `${value.toFixed(1)} ms`;
const bytes = (value: number): string => `${value.toLocaleString('en-US')} bytes`;

function describeDiscovery(discovery: Settings['discovery']): string {
  return discovery.backend === 'etcd'
    ? `etcd discovery at ${discovery.etcdEndpoints.join(', ')}`
    : `SQLite discovery at ${discovery.sqlitePath}`;
}

export function describeDecision(request: string, decision: RouteDecision): DemoDecision {
  return {
    request,
    action: decision.action,
    reason: decision.reason,
    detail: decision.detail,
    blocks: decision.source?.blocks.count ?? decision.extent,
    savingMs: decision.savingMs,
    costMs: decision.costMs,
    rejected: decision.rejected.map((rejection) => `${rejection.worker} ${rejection.reason}: ${rejection.detail}`),
  };
}

/** The router's lookup clock under `unboundedLookup`: it never advances, so no lookup passes its budget. */
const unboundedLookupClock = (): number => 0;

/** The router in the parent, with the calibration the prefill's receipts feed and the metrics that count its decisions. */
export interface DemoRouter {
  readonly context: RouteContext;
  readonly calibration: TransferCalibration;
  readonly metrics: RouterMetrics;
  readonly turn2: RouteRequest;
}

/** Decides, and counts the decision in the router's metrics. */
function decideCounted(request: RouteRequest, router: Pick<DemoRouter, 'context' | 'metrics'>): RouteDecision {
  const decision = decide(request, router.context);
  router.metrics.decided(decision);
  return decision;
}

/** Records the pull's calibration sample and decides turn 2 again: the router's transfer estimate before, measured, and after. */
export function recalibrate(router: DemoRouter, before: RouteDecision, report: PullReport): DemoCalibration | null {
  if (report.calibration === undefined) return null;
  router.calibration.record(report.calibration);
  const after = decideCounted(router.turn2, router);
  const lookupBudgetMs = router.context.settings.router.transferSourceLookupBudgetMs;
  return {
    blocks: report.calibration.blocks,
    transferMs: {
      prior: before.costMs - lookupBudgetMs,
      measured: report.calibration.transferMs,
      calibrated: after.costMs - lookupBudgetMs,
    },
    decision: describeDecision('turn 2, calibrated', after),
  };
}

/** The pull's receipt said as progress, and the router calibrated from it (turn 2 decided again). */
export function reportPull(
  router: DemoRouter,
  pullDecision: RouteDecision,
  report: PullReport,
  progress: (line: string) => void,
): { pull: DemoPull; calibration: DemoCalibration | null } {
  const pull = pullSummary(report);
  progress(
    `  ${pull.blocks} blocks, ${bytes(pull.bytes)}, ${pull.checkedBlocks} blocks' checksums compared (${pull.verify}), ${pull.verified ? 'every byte verified' : 'NOT verified'}, ` +
      `${ms(pull.ms)}, ${pull.gbitPerS.toFixed(2)} Gbit/s; estimated TTFT saving ${ms(pull.savingMs.measured)} (router predicted ${ms(pull.savingMs.predicted)})`,
  );
  const calibration = recalibrate(router, pullDecision, report);
  if (calibration !== null) {
    const { prior, measured, calibrated } = calibration.transferMs;
    progress(
      `calibration: the router priced ${calibration.blocks} blocks at ${ms(prior)} (prior); the pull took ${ms(measured)}; from its receipt the router now prices them at ${ms(calibrated)}`,
    );
    progress(
      `  turn 2 again: ${calibration.decision.action} (${calibration.decision.reason}): ${calibration.decision.detail}`,
    );
  }
  return { pull, calibration };
}

/** The pull command for the router's decision, with the prediction the prefill compares its receipt with. */
export function pullCommandOf(pullDecision: RouteDecision, settings: Settings) {
  return {
    type: 'pull',
    hint: hintLine(pullDecision.source as PullHint),
    prediction: {
      predictedMs: pullDecision.savingMs - pullDecision.costMs,
      prefillTokenUs: settings.router.transferSourcePrefillTokenUs,
      lookupBudgetMs: settings.router.transferSourceLookupBudgetMs,
    },
  } as const;
}

/**
 * Turn 2's pull as the router decided it, whose receipt calibrates the router; then the same pull with
 * decode rank 1 armed to crash (SIGKILL) at the pin request it receives, before answering: the prefill
 * recomputes and commits nothing unverified. That pull holds the pin decode rank 0 granted it until
 * rank 0, stopped with SIGTERM, has withdrawn its part and waits for its readers: its drain waits for it.
 */
async function pullTurn2(
  started: RankProcesses,
  router: DemoRouter,
  pullDecision: RouteDecision,
  decision: DemoDecision,
  options: MainJobOptions & { readonly timeoutMs: number },
): Promise<Pick<DemoSummary, 'pull' | 'killedRank' | 'calibration'>> {
  const { progress, settings, timeoutMs, requestServed } = options;
  const hint = pullDecision.source as PullHint;
  const pullCommand = pullCommandOf(pullDecision, settings);

  progress(
    `pull: ${prefillId} pulls ${hint.blocks.count} blocks from both decode ranks (TP 2 → TP 1), checksums verified: ${settings.endpoint.verify} (endpoint.verify)`,
  );
  const pulled = await started.request(prefillId, 0, pullCommand, 'pulled', timeoutMs);
  requestServed?.(decision.request, decision, pulled.pull);
  const { pull, calibration } = reportPull(router, pullDecision, pulled.pull, progress);

  const crash =
    options.backend === 'loopback'
      ? 'stops without a drain, its agent closed under its reader,'
      : 'is killed (SIGKILL)';
  progress(`killed rank: the same pull, and ${decodeId}/tp1 ${crash} when the prefill's pin request reaches it`);
  await started.request(decodeId, 1, { type: 'crash-on-pin' }, 'armed', timeoutMs);
  const holding = started.next(prefillId, 0, 'holding', timeoutMs);
  const again = started.request(prefillId, 0, { ...pullCommand, holdPins: true }, 'pulled', timeoutMs);
  const killed = await started.exited(decodeId, 1);
  const held = await holding;
  progress(`  the prefill holds its pin at ${held.sources.join(', ')}; ${decodeId}/tp0 is stopped (SIGTERM) meanwhile`);
  const waiting = started.next(decodeId, 0, 'waiting-for-readers', timeoutMs);
  started.kill(decodeId, 0, 'SIGTERM');
  await waiting;
  progress(`  ${decodeId}/tp0 withdrew its rank part and waits for the pin; the prefill releases it`);
  started.send(prefillId, 0, { type: 'release-pins' });
  const recomputed = (await again).pull;
  // Its drain ends once the pin is released; the shutdown below collects its report.
  await started.exited(decodeId, 0);
  requestServed?.(`${decision.request}, ${decodeId}/tp1 killed`, decision, recomputed);
  const killedRank = {
    process: `${decodeId}/tp1`,
    signal: killed.signal,
    recomputed: recomputed.recomputed.blocks,
    committedBlocks: recomputed.blocks,
    verified: recomputed.verified,
    reasons: recomputed.recomputed.reasons,
  };
  progress(
    `  committed ${killedRank.committedBlocks} blocks, recomputed ${killedRank.recomputed}: ${killedRank.reasons.join('; ')}`,
  );
  return { pull, killedRank, calibration };
}

/**
 * The discovery the ranks share. SQLite: a fresh file of this run's own, the cluster secret created
 * beside it by the first rank. etcd: the endpoints the settings name, and the secret file they name or
 * else one of this run's own, which every rank is given.
 */
export function runSettings(settings: Settings, dir: string): Settings {
  const { discovery } = settings;
  if (discovery.backend === 'sqlite')
    return { ...settings, discovery: { ...discovery, sqlitePath: join(dir, 'discovery.sqlite') } };
  if (discovery.secretFile !== '') return settings;
  const secretFile = join(dir, 'cluster.secret');
  ClusterSecret.readOrCreate(secretFile);
  return { ...settings, discovery: { ...discovery, secretFile } };
}

/** Turn 1: the prefill rank computes the prompt's blocks and hands them off; each decode rank retains them and decodes the reply's. */
async function handOffTurn1(
  started: RankProcesses,
  chain: BigUint64Array,
  progress: (line: string) => void,
  timeoutMs: number,
  memory: MemoryKind,
): Promise<Extract<RankMessage, { type: 'handed-off' }>> {
  progress(`turn 1: prefill computes ${handedOffBlocks} blocks and WRITEs them to both decode ranks (TP 1 → TP 2)`);
  const slots = await Promise.all(
    [0, 1].map((tpRank) =>
      started.request(decodeId, tpRank, { type: 'allocate', count: handedOffBlocks }, 'allocated', timeoutMs),
    ),
  );
  const destinationSlots = slots[0]?.slots ?? [];
  if (slots.some((answer) => answer.slots.join() !== destinationSlots.join()))
    throw new DemoProcessError(decodeId, 'ranks allocated different blocks for one hand-off', []);
  const handOff = await started.request(
    prefillId,
    0,
    { type: 'hand-off', hashes: hex(chain.subarray(0, handedOffBlocks)), destinationSlots },
    'handed-off',
    timeoutMs,
  );
  progress(`  handed off ${handOff.blocks} blocks, ${bytes(handOff.bytes)} in ${ms(handOff.ms)}`);
  const retained = await Promise.all(
    [0, 1].map((tpRank) =>
      started.request(
        decodeId,
        tpRank,
        {
          type: 'retain',
          slots: destinationSlots,
          hashes: hex(chain.subarray(0, handedOffBlocks)),
          append: hex(chain.subarray(handedOffBlocks)),
          publishInventory: tpRank === 0,
        },
        'retained',
        timeoutMs,
      ),
    ),
  );
  // Vram is not read back by the host: the pull's checksums, on the GPU, check what the hand-off wrote.
  const checked = (verified: number): string =>
    memory === 'vram' ? 'handed-off blocks in vram' : `${verified}/${handedOffBlocks} handed-off blocks verified`;
  for (const [tpRank, answer] of retained.entries()) {
    progress(
      `  decode tp${tpRank}: ${checked(answer.verified)}, ${answer.appended} decoded, ${answer.blocks} retained`,
    );
  }
  return handOff;
}

/** Each rank's drain as the summary lists it, each said as a line of progress. */
export function reportDrains(
  drains: Awaited<ReturnType<RankProcesses['stop']>>,
  progress: (line: string) => void,
): DemoSummary['drain'] {
  const drain = drains.map(drainRow);
  for (const row of drain) {
    progress(
      row.pins === null
        ? `  ${row.process}: ended by ${row.signal} without a drain report`
        : `  ${row.process}: ${row.banksReturned} banks returned, ${row.banksRetained} retained, ${row.pins.waitedFor} pin${row.pins.waitedFor === 1 ? '' : 's'} waited for` +
            (row.pins.held.length === 0
              ? ''
              : `: ${row.pins.held.map((pin) => `${pin.reader}'s pin of ${pin.blocks} blocks, ${pin.ended}`).join('; ')}`),
    );
  }
  return drain;
}

/** GPU reuse, asked for with the settings' declared profile (if any): profile admission says why not. */
function gpuReuse(
  settings: Settings,
  capabilities: MainJobOptions['capabilities'],
  workers: readonly Worker[],
  progress: (line: string) => void,
): DemoSummary['gpu'] {
  const gpuSettings = { ...settings, router: { ...settings.router, enableDecodeToPrefillGpuReuse: true } };
  const gpuActivation = explainActivation({
    settings: gpuSettings,
    composition: kvreuseSettings,
    capabilities,
    workers,
    profile: declaredProfile(settings, { settings: kvreuseSettings }),
  });
  const gpu = {
    active: gpuActivation.mode === 'gpu',
    mode: gpuActivation.mode,
    reason: gpuActivation.reasons.join('; '),
  };
  progress(`gpu reuse: ${gpu.active ? 'active' : `refused (${gpu.mode}): ${gpu.reason}`}`);
  return gpu;
}

/**
 * Turn 2: the router in this process decides, on discovery and the retained inventory, for turn 2 and a
 * short request. `eventsFed`: the inventory is the decode worker's KV events, applied from its sequence
 * 0 on (a gap repaired by replay), so it is complete as soon as the worker is ready.
 */
export async function decideTurn2(
  discovery: DiscoveryStore,
  inventory: RetainedInventory,
  settings: Settings,
  options: MainJobOptions & { readonly metrics: RouterMetrics; readonly admissionGate?: ReadinessGate },
  { decode, prefill }: { readonly decode: Worker; readonly prefill: Worker },
  conversation: readonly number[],
  progress: (line: string) => void,
  eventsFed = false,
): Promise<{ pullDecision: RouteDecision; decisions: DemoDecision[]; router: DemoRouter }> {
  const sources = new SourceBook({ inventory });
  const watch = await watchWorkerReadiness(discovery, decode.workerId, {
    onChange: (readiness) => sources.observe(readiness),
    ...(options.admissionGate === undefined ? {} : { admissionGate: options.admissionGate }),
  });
  sources.observe(watch.current);
  if (eventsFed && watch.current.ready) sources.inventoryComplete(decode.workerId, watch.current.epoch);
  const activation = explainActivation({
    settings,
    composition: kvreuseSettings,
    capabilities: options.capabilities,
    workers: [decode, prefill],
    profile: declaredProfile(settings, { settings: kvreuseSettings }),
  });
  // One receipt is all this router will see before it decides again: it trusts it (a fleet's router waits for 8).
  const calibration = new TransferCalibration({ minReceipts: 1 });
  const context = {
    settings,
    inventory,
    sources,
    activation,
    calibration,
    ...(options.unboundedLookup === true ? { clock: unboundedLookupClock } : {}),
  };
  const destination = { worker: prefill, localBlocks: 0 };
  const { blockTokens } = decode.geometry;
  const turn2 = [...conversation, ...Array.from({ length: blockTokens / 2 }, (_, i) => otherToken(i))];
  const shortRequest = [
    ...conversation.slice(0, sharedSystemBlocks * blockTokens),
    ...Array.from({ length: 10 * blockTokens }, (_, i) => otherToken(i + 1)),
  ];
  await warmUpRouter(options.unboundedLookup === true, () => {
    for (const tokens of [turn2, shortRequest]) decide({ tokens, destination }, context);
  });
  const counted = { context, metrics: options.metrics };
  const pullDecision = decideCounted({ tokens: turn2, destination }, counted);
  const decisions = [
    describeDecision('turn 2', pullDecision),
    describeDecision('short request', decideCounted({ tokens: shortRequest, destination }, counted)),
  ];
  await watch.close();
  progress('turn 2: the router decides');
  for (const decision of decisions)
    progress(`  ${decision.request}: ${decision.action} (${decision.reason}): ${decision.detail}`);
  return {
    pullDecision,
    decisions,
    router: { context, calibration, metrics: options.metrics, turn2: { tokens: turn2, destination } },
  };
}

/** Both workers once ready: with banks in vram, through the declared profile's admission gate (`gate`, for the router too). */
async function readyWorkers(
  discovery: DiscoveryStore,
  settings: Settings,
  capabilities: Capabilities,
  memory: MemoryKind,
): Promise<{ gate: { admissionGate?: ReadinessGate }; decode: Worker; prefill: Worker }> {
  const gate = memory === 'vram' ? { admissionGate: vramAdmissionGate(settings, capabilities) } : {};
  const decode = await readyWorker(discovery, decodeId, gate.admissionGate);
  return { gate, decode, prefill: await readyWorker(discovery, prefillId, gate.admissionGate) };
}

/** Starts every rank, saying where and how, and each rank's metrics address and readiness as it comes. */
async function startRanks(
  settings: Settings,
  options: MainJobOptions,
  timeoutMs: number,
  memory: MemoryKind,
): Promise<RankProcesses> {
  const { progress } = options;
  const where =
    options.backend === 'loopback'
      ? 'in this process (loopback agents reach only agents of their own process)'
      : 'as OS processes';
  const banks = memory === 'vram' ? `, banks in GPU ${demoGpu}'s memory` : '';
  progress(
    `starting ${ranks.map((rank) => `${rank.workerId}/tp${rank.tpRank}`).join(', ')} ${where} (${options.backend}, ${describeDiscovery(settings.discovery)}${banks})`,
  );
  return RankProcesses.start({
    ranks,
    backend: options.backend,
    memory,
    blocks: bankBlocks,
    settings,
    libraryPath: options.capabilities.libraryPath,
    readyTimeoutMs: timeoutMs,
    onMessage: (rank, message: RankMessage) => {
      if (message.type === 'published' && message.metricsUrl !== undefined)
        progress(`  ${rank.workerId}/tp${rank.tpRank} serves its metrics at ${message.metricsUrl}`);
      if (message.type === 'ready') progress(`  ${rank.workerId}/tp${rank.tpRank} ready`);
    },
  });
}

/** Turn 1's conversation: the tokens of its retained blocks, and their block hashes under the decode worker's scheme. */
function turn1Conversation(decode: Worker, settings: Settings): { conversation: number[]; chain: BigUint64Array } {
  const scheme = blockHashScheme(decode.geometry, settings.inventory.hashSeed);
  const blockTokens = decode.geometry.blockTokens;
  const conversation = Array.from({ length: retainedBlocks * blockTokens }, (_, i) => conversationToken(i));
  return { conversation, chain: hashBlockChain(conversation, scheme) };
}

interface FollowedInventory {
  readonly inventory: RetainedInventory;
  readonly follower: Awaited<ReturnType<typeof followInventory>>;
  /** Resolves once the inventory of `incarnation` is complete (an earlier run's may still be in etcd: only this run's counts). */
  completed(incarnation: string): Promise<void>;
}

/** The retained inventory the router follows in discovery. */
async function followRunInventory(discovery: DiscoveryStore): Promise<FollowedInventory> {
  const inventory = new RetainedInventory();
  const complete = new Set<string>();
  const waiting = new Map<string, () => void>();
  const follower = await followInventory(discovery, inventory, {
    onComplete: ({ incarnation }) => {
      complete.add(incarnation);
      waiting.get(incarnation)?.();
    },
  });
  const completed = (incarnation: string): Promise<void> =>
    complete.has(incarnation) ? Promise.resolve() : new Promise((resolve) => waiting.set(incarnation, resolve));
  return { inventory, follower, completed };
}

/** The router's priors for the run, each said as a line of progress. */
function runPriors(settings: Settings, handOff: { blocks: number; ms: number }, options: MainJobOptions): DemoPriors {
  const given = options.givenPriors ?? { blockUs: false, prefillTokenUs: false };
  const priors = demoPriors(settings, given, handOff, 'compute' in options ? options.compute : thisMachine());
  for (const line of priorLines(priors)) options.progress(line);
  return priors;
}

/** With `endpoint.metrics_port` set, this process serves its router's metrics on the port after the ranks'. */
async function serveRouterMetrics(
  endpoint: Settings['endpoint'],
  metrics: RouterMetrics,
  progress: (line: string) => void,
): Promise<MetricsListener | undefined> {
  if (endpoint.metricsPort === 0) return undefined;
  const listener = await listenMetrics(metrics.registry, endpoint.metricsPort + ranks.length, endpoint.metricsHost);
  progress(`  the router (this process) serves its metrics at ${listener.url}`);
  return listener;
}

/** `kvreuse demo --hold`: every process still running keeps serving until the hold ends. */
async function holdUntil(hold: () => Promise<string>, progress: (line: string) => void): Promise<void> {
  progress('holding: the router and the ranks still running serve their metrics until SIGINT or SIGTERM');
  progress(`  ${await hold()}: the hold ends`);
}

/** Runs the main job to its end (every process stopped), and returns its summary. */
export async function runMainJob(options: MainJobOptions): Promise<DemoSummary> {
  const { progress } = options;
  const timeoutMs = options.stepTimeoutMs ?? 120_000;
  // The run's files (its SQLite discovery, the cluster secret) in a folder only this user can read (mkdtemp: 0700).
  const dir = mkdtempSync(join(tmpdir(), 'kvreuse-demo-'));
  let discovery: DiscoveryStore | undefined;
  let follower: FollowedInventory['follower'] | undefined;
  let processes: RankProcesses | undefined;
  let metricsListener: MetricsListener | undefined;
  let closing: Promise<void> | undefined;
  // Once, whether the job ends, fails at any step or the process is interrupted: every rank drained, discovery closed, the run's files gone.
  const closeAll = (): Promise<void> =>
    (closing ??= (async () => {
      try {
        await processes?.stop();
        await follower?.close();
        await discovery?.close();
        await metricsListener?.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    })());
  const takeBack = options.whenInterrupted?.(closeAll) ?? (() => undefined);
  try {
    const settings = runSettings(options.settings, dir);
    discovery = openDiscovery(settings.discovery);
    const followed = await followRunInventory(discovery);
    ({ follower } = followed);
    const metrics = new RouterMetrics();
    metricsListener = await serveRouterMetrics(settings.endpoint, metrics, progress);
    const memory = bankMemory(settings, options.capabilities);
    processes = await startRanks(settings, options, timeoutMs, memory);
    const started = processes;
    const { gate, decode, prefill } = await readyWorkers(discovery, settings, options.capabilities, memory);

    // Turn 1: the conversation's prompt, prefilled and handed off; decoding appends the reply's blocks.
    const { conversation, chain } = turn1Conversation(decode, settings);
    const handOff = await handOffTurn1(started, chain, progress, timeoutMs, memory);
    await followed.completed(decode.incarnation);
    const priors = runPriors(settings, handOff, options);
    const routed = withPriors(settings, priors);

    const { pullDecision, decisions, router } = await decideTurn2(
      discovery,
      followed.inventory,
      routed,
      { ...options, metrics, ...gate },
      { decode, prefill },
      conversation,
      progress,
    );
    const gpu = gpuReuse(settings, options.capabilities, [decode, prefill], progress);

    for (const decision of decisions)
      if (decision.action !== 'pull') options.requestServed?.(decision.request, decision, null);
    const pulls =
      pullDecision.action === 'pull'
        ? await pullTurn2(started, router, pullDecision, decisions[0]!, { ...options, settings: routed, timeoutMs })
        : { pull: null, killedRank: null, calibration: null };
    if (pulls.pull === null) progress('pull: none, the router recomputes turn 2');
    if (options.hold !== undefined) await holdUntil(options.hold, progress);

    progress('shutdown: SIGTERM to every process still running');
    const drains = await started.stop();
    processes = undefined;
    const drain = reportDrains(drains, progress);
    return {
      ...pulls,
      handOff: { blocks: handOff.blocks, bytes: handOff.bytes, ms: handOff.ms },
      priors,
      decisions,
      gpu,
      drain,
    };
  } finally {
    takeBack();
    await closeAll();
  }
}
