import type { inventoryGroup } from '@kvreuse/inventory';
import type { routerGroup } from './settings.js';
import type { SettingsOf } from '@kvreuse/config';
import type { Worker } from '@kvreuse/descriptors';
import type { Activation } from '@kvreuse/profile-admission';
import {
  type AdvisoryRetainedPrefix,
  blockHashFunction,
  InventoryEventError,
  RetainedInventory,
} from '@kvreuse/inventory';
import type { SourceTier, TransferCalibration } from './calibration.js';
import { type EstimateKind, estimatePull, type PullEstimate, type PullShape } from './cost-model.js';
import { CalibrationClockError, type CalibrationClockRefusal, RouteRequestError, RouterOptionError } from './errors.js';
import { LookupBudget, type LookupFault } from './lookup-budget.js';
import { lookupClock } from './lookup-clock.js';
import { type PromptInput, promptChain } from './prompt-chain.js';
import { type LinkClass, linkClassBetween, SourceBook, type SourceState } from './sources.js';

/** The prefill worker the request goes to, and what it holds already. */
export interface RouteDestination {
  /** Its complete descriptor (a ready `WorkerReadiness`'s `worker`). */
  readonly worker: Worker;
  /** How many leading blocks of the prompt it already holds. */
  readonly localBlocks: number;
  /**
   * The machine it runs on, to tell `same-host` sources from `network` ones when the workers' rank parts
   * do not name their host (rank part version 3 `host`, which is used first).
   */
  readonly host?: string;
}

export type RouteRequest = PromptInput & { readonly destination: RouteDestination };

export interface RouteContext {
  /** The resolved settings (`resolveSettings` of @kvreuse/config); the `router` and `inventory` groups are read. */
  readonly settings: SettingsOf<[typeof routerGroup, typeof inventoryGroup]>;
  /** The retained inventory, followed from discovery (`followInventory`). */
  readonly inventory: RetainedInventory;
  readonly sources: SourceBook;
  /** Which reuse runs (`explainActivation` of @kvreuse/profile-admission): GPU-tier sources only in `gpu` mode. */
  readonly activation: Pick<Activation, 'mode' | 'reasons'>;
  /**
   * Receipts' estimates, used instead of the priors once confident. When its clock fails while the
   * decision reads it, the decision is priced with the priors (see `RouteDecision.calibrationFault`).
   */
  readonly calibration?: TransferCalibration;
  /**
   * Monotonic milliseconds against which the lookup budget runs. Default: a clock that advances by the
   * lesser of wall and CPU time (the thread's where Node reports it, else the process's), so that a
   * decision the scheduler preempted is not charged for the time other processes ran. One that throws,
   * calls back into `decide`, reads other than a finite number or goes back ends the decision as
   * `budget-exceeded`, saying how (`RouteDecision.lookupFault`).
   */
  readonly clock?: () => number;
}

/** Why a decision is what it is. Stable codes. */
export type DecisionReason =
  'worth-it' | 'disabled' | 'no-candidate' | 'too-short' | 'not-worth-it' | 'budget-exceeded';
export const decisionReasons: readonly DecisionReason[] = [
  'worth-it',
  'disabled',
  'no-candidate',
  'too-short',
  'not-worth-it',
  'budget-exceeded',
];

/** Why one worker that retains part of the prompt is not the source. Stable codes. */
export type RejectionReason =
  | 'destination'
  | 'not-ready'
  | 'stale-incarnation'
  | 'not-decode'
  | 'unhealthy'
  | 'source-warming'
  | 'source-busy'
  | 'incompatible'
  | 'no-extension'
  | 'gpu-not-admitted'
  | 'too-short'
  | 'not-worth-it'
  | 'outbid';
export const rejectionReasons: readonly RejectionReason[] = [
  'destination',
  'not-ready',
  'stale-incarnation',
  'not-decode',
  'unhealthy',
  'source-warming',
  'source-busy',
  'incompatible',
  'no-extension',
  'gpu-not-admitted',
  'too-short',
  'not-worth-it',
  'outbid',
];

export interface RejectedSource {
  readonly worker: string;
  readonly reason: RejectionReason;
  /** The same in words, with the values. */
  readonly detail: string;
}

/**
 * Where to pull from. Advisory like the inventory it comes from: it reserves nothing; the endpoint pins
 * the blocks at the source, and only the pin proves they are there.
 */
export interface PullHint {
  readonly workerId: string;
  readonly incarnation: string;
  /** The source incarnation's epoch: a pin for another epoch must be refused. */
  readonly epoch: number;
  /** Block positions in the prompt's chain: `[start, start + count)`. */
  readonly blocks: { readonly start: number; readonly count: number };
  /** The hashes of those blocks, to name them in the pin: a view of the request's chain when it was a `BigUint64Array` (no copy). */
  readonly hashes: BigUint64Array | readonly bigint[];
  readonly blockTokens: number;
  readonly tier: SourceTier;
  readonly linkClass: LinkClass;
}

/** How a source's retained prefix was cut to the part a pull may take. */
export interface PrefixCut {
  /** The leading blocks the source retains, on any tier. */
  readonly retainedBlocks: number;
  /** The leading blocks it retains on a tier the pull may read: the prefix priced. */
  readonly usableBlocks: number;
  /** Why the rest is left out: its blocks lie in GPU memory only, and GPU reuse is not active. */
  readonly reason: 'gpu-not-admitted';
  /** The same in words, with the values. */
  readonly detail: string;
}

/** Why a decision given a calibration was priced with the priors: the calibration's clock failed. */
export interface CalibrationFault {
  /** How the clock failed (the `refusal` of the `CalibrationClockError` it caused). */
  readonly refusal: CalibrationClockRefusal;
  /** The same in words: the error's message. */
  readonly detail: string;
}

export interface RouteDecision {
  readonly action: 'pull' | 'recompute';
  readonly reason: DecisionReason;
  /** The reason in words, with the settings and values that decided it. */
  readonly detail: string;
  /** Present only when pulling. */
  readonly source?: PullHint;
  /** Blocks the best candidate would supply beyond the destination's own (0 without one). */
  readonly extent: number;
  /** Present when the best candidate's retained prefix was cut to its leading run on an allowed tier. */
  readonly cut?: PrefixCut;
  readonly savingMs: number;
  readonly costMs: number;
  /** Which transfer estimate priced the best candidate. */
  readonly estimate: EstimateKind;
  /** Which prefill estimate priced the saving. */
  readonly prefillEstimate: EstimateKind;
  /** Workers the inventory named as retaining the prompt's first block, looked at before deciding. */
  readonly candidatesConsidered: number;
  readonly rejected: readonly RejectedSource[];
  /**
   * Present when the calibration's clock failed during the decision: every candidate was then priced
   * with the priors, as without a calibration, and `detail` says so.
   */
  readonly calibrationFault?: CalibrationFault;
  /**
   * Present when the lookup clock (`RouteContext.clock`) failed during the decision: it is then
   * `budget-exceeded` however little time it took, and `detail` says so.
   */
  readonly lookupFault?: LookupFault;
}

interface Priced {
  readonly state: SourceState;
  readonly prefix: AdvisoryRetainedPrefix;
  readonly extent: number;
  readonly tier: SourceTier;
  readonly cut: PrefixCut | undefined;
  readonly linkClass: LinkClass;
  readonly savingMs: number;
  readonly costMs: number;
  readonly net: number;
  readonly estimate: EstimateKind;
  readonly prefillEstimate: EstimateKind;
}

/**
 * Decides whether the destination pulls the prompt's prefix from a decode worker that retains it, and
 * from which, or recomputes; and says why. See the package README for the rules.
 */
export function decide(request: RouteRequest, context: RouteContext): RouteDecision {
  checkContext(context);
  const destination = checkDestination(request);
  const { settings, inventory, sources, activation, calibration } = context;
  const router = settings.router;
  const blockTokens = destination.worker.geometry.blockTokens;
  const local = destination.localBlocks;
  if (!router.enableDecodeToPrefillReuse) return recompute('disabled', 'router.enable_decode_to_prefill_reuse is off');
  if (activation.mode === 'off') return recompute('disabled', `reuse is off: ${activation.reasons.join('; ')}`);
  const budget = new LookupBudget(context.clock ?? lookupClock(), router.transferSourceLookupBudgetMs);
  const chain = promptChain(request, destination.worker, settings.inventory.hashSeed);
  if (chain.length <= local) {
    return recompute(
      'no-candidate',
      `the destination holds ${local} of the prompt's ${chain.length} blocks already: nothing to pull`,
    );
  }
  if (budget.spent()) return exceeded(budget, 0, []);
  const prefixes = lookUp(inventory, chain);
  if (budget.spent()) return exceeded(budget, prefixes.length, []);

  const rejected: RejectedSource[] = [];
  const priced: Priced[] = [];
  const pricing: Pricing = {
    sources,
    destination,
    router,
    estimates: new DecisionEstimates(router, calibration),
    activation,
    seed: settings.inventory.hashSeed,
    gpu: activation.mode === 'gpu',
    local,
    blockTokens,
  };
  for (let i = 0; i < prefixes.length; i++) {
    if (i > 0 && budget.spent()) return withFault(exceeded(budget, i, rejected), pricing.estimates);
    const candidate = priceSource(prefixes[i]!, pricing, rejected);
    if (candidate !== undefined) priced.push(candidate);
  }
  if (budget.spent()) return withFault(exceeded(budget, prefixes.length, rejected), pricing.estimates);
  if (pricing.estimates.fault !== undefined) repriceWithPriors(priced, pricing);

  const considered = prefixes.length;
  const chosen = choose(priced, router, local, rejected);
  if (chosen === undefined) return withFault(declined(priced, router, considered, rejected), pricing.estimates);
  const { state, extent, tier, linkClass } = chosen;
  const detail = `pull ${extent} blocks from ${state.workerId}: ${describeNet(chosen)}${chosen.cut === undefined ? '' : `; ${chosen.cut.detail}`}`;
  const decision = pricedDecision(chosen, 'pull', 'worth-it', detail, considered, rejected);
  decision.source = {
    workerId: state.workerId,
    incarnation: state.incarnation,
    epoch: state.epoch,
    blocks: { start: local, count: extent },
    hashes:
      chain instanceof BigUint64Array ? chain.subarray(local, local + extent) : chain.slice(local, local + extent),
    blockTokens,
    tier,
    linkClass,
  };
  return withFault(decision, pricing.estimates);
}

/**
 * The estimates of one decision's candidates: from its calibration until the calibration's clock fails,
 * then from the priors. A broken clock must not stop routing, and the decision must stay visible as
 * priced without calibration (`fault`).
 */
class DecisionEstimates {
  fault: CalibrationFault | undefined;

  constructor(
    private readonly router: RouteContext['settings']['router'],
    private calibration: TransferCalibration | undefined,
  ) {}

  estimate(shape: PullShape): PullEstimate {
    if (this.calibration !== undefined) {
      try {
        return estimatePull(shape, this.router, this.calibration);
      } catch (error) {
        if (!(error instanceof CalibrationClockError)) throw error;
        this.calibration = undefined;
        this.fault = { refusal: error.refusal, detail: error.message };
      }
    }
    return estimatePull(shape, this.router, undefined);
  }
}

/** Prices again with the priors the candidates priced from the calibration before its clock failed. */
function repriceWithPriors(priced: Priced[], pricing: Pricing): void {
  for (let i = 0; i < priced.length; i++) {
    const candidate = priced[i]!;
    if (candidate.estimate === 'calibrated' || candidate.prefillEstimate === 'calibrated')
      priced[i] = price(candidate, pricing);
  }
}

/** The decision, saying so when the calibration's clock failed while it was priced. */
function withFault(decision: DecisionDraft, estimates: DecisionEstimates): RouteDecision {
  const { fault } = estimates;
  if (fault === undefined) return decision;
  decision.detail += `; priced with the priors: ${fault.detail}`;
  decision.calibrationFault = fault;
  return decision;
}

/** What the checks of one source read, the same for every source of one decision. */
interface Pricing {
  readonly sources: SourceBook;
  readonly destination: RouteDestination;
  readonly router: RouteContext['settings']['router'];
  readonly estimates: DecisionEstimates;
  readonly activation: RouteContext['activation'];
  readonly seed: string;
  /** Whether GPU reuse is active. */
  readonly gpu: boolean;
  /** Blocks the destination holds already. */
  readonly local: number;
  readonly blockTokens: number;
}

/**
 * The ready state of the prefix's source, if it may serve the destination at all (whatever its prefix);
 * otherwise rejects it (into `rejected`, returning undefined) and says why.
 */
function servingSource(
  prefix: AdvisoryRetainedPrefix,
  pricing: Pricing,
  rejected: RejectedSource[],
): SourceState | undefined {
  const id = prefix.workerId;
  if (id === pricing.destination.worker.workerId) {
    reject(rejected, id, 'destination', 'the destination itself');
    return undefined;
  }
  const state = pricing.sources.get(id);
  if (state === undefined) {
    reject(
      rejected,
      id,
      'not-ready',
      `${id} is not ready (its inventory of incarnation ${prefix.incarnation} is advisory only)`,
    );
    return undefined;
  }
  if (state.incarnation !== prefix.incarnation) {
    reject(
      rejected,
      id,
      'stale-incarnation',
      `the inventory holds incarnation ${prefix.incarnation}'s blocks, but the ready incarnation is ${state.incarnation} (epoch ${state.epoch})`,
    );
    return undefined;
  }
  if (state.worker.role !== 'decode') {
    reject(rejected, id, 'not-decode', `${id} is a ${state.worker.role} worker; sources are decode workers`);
    return undefined;
  }
  if (!state.health.healthy) {
    reject(rejected, id, 'unhealthy', `${id} is unhealthy: ${state.health.reason}`);
    return undefined;
  }
  if (state.warming) {
    reject(rejected, id, 'source-warming', `${id} (epoch ${state.epoch}) has not yet published its complete inventory`);
    return undefined;
  }
  if (state.activePulls >= pricing.router.maxConcurrentPullsPerSource) {
    reject(
      rejected,
      id,
      'source-busy',
      `${id} serves ${state.activePulls} pulls; router.max_concurrent_pulls_per_source = ${pricing.router.maxConcurrentPullsPerSource}`,
    );
    return undefined;
  }
  const incompatible = incompatibility(pricing.sources, state, pricing.destination.worker, pricing.seed);
  if (incompatible !== undefined) {
    reject(rejected, id, 'incompatible', incompatible);
    return undefined;
  }
  return state;
}

/** Prices the pull of one retained prefix, or rejects its source (into `rejected`, returning undefined) and says why. */
function priceSource(prefix: AdvisoryRetainedPrefix, pricing: Pricing, rejected: RejectedSource[]): Priced | undefined {
  const id = prefix.workerId;
  const state = servingSource(prefix, pricing, rejected);
  if (state === undefined) return undefined;
  if (prefix.blocks <= pricing.local) {
    reject(
      rejected,
      id,
      'no-extension',
      `${id} retains ${prefix.blocks} leading blocks; the destination holds ${pricing.local} already`,
    );
    return undefined;
  }
  const usable = usablePrefix(prefix, pricing.gpu);
  if (usable.blocks <= pricing.local) {
    const hostRun = usable.blocks === 0 ? 'none of them is' : `only the first ${usable.blocks} are`;
    reject(
      rejected,
      id,
      'gpu-not-admitted',
      `${id} retains ${prefix.blocks} leading blocks, ${hostRun} in host memory and the destination holds ${pricing.local} already; the rest are in GPU memory only, and GPU reuse is not active: ${pricing.activation.reasons.join('; ')}`,
    );
    return undefined;
  }
  const tier = usable.tier;
  const cut = usable.blocks < prefix.blocks ? prefixCut(prefix, usable.blocks, pricing.activation.reasons) : undefined;
  const extent = usable.blocks - pricing.local;
  const linkClass = linkClassBetween(state, pricing.destination.worker, pricing.destination.host);
  return price({ state, prefix, extent, tier, cut, linkClass }, pricing);
}

/** The pull of a candidate, priced by the decision's estimates. */
function price(
  pull: Omit<Priced, 'savingMs' | 'costMs' | 'net' | 'estimate' | 'prefillEstimate'>,
  pricing: Pricing,
): Priced {
  const { state, prefix, extent, tier, cut, linkClass } = pull;
  const { savingMs, costMs, estimate, prefillEstimate } = pricing.estimates.estimate({
    extent,
    blockTokens: pricing.blockTokens,
    tier,
    linkClass,
  });
  return {
    state,
    prefix,
    extent,
    tier,
    cut,
    linkClass,
    savingMs,
    costMs,
    net: savingMs - costMs,
    estimate,
    prefillEstimate,
  };
}

/** Rejects the priced sources that fall short of the thresholds or are outbid; returns the best one left. */
function choose(
  priced: Priced[],
  router: RouteContext['settings']['router'],
  local: number,
  rejected: RejectedSource[],
): Priced | undefined {
  // Best net saving first; ties go to the longer extent, then to the smaller worker id.
  priced.sort((a, b) => b.net - a.net || b.extent - a.extent || (a.state.workerId < b.state.workerId ? -1 : 1));
  const minBlocks = router.minimumTransferPrefixBlocks;
  const margin = router.minimumEstimatedTtftSavingMs;
  let chosen: Priced | undefined;
  let chosenNet = '';
  for (const candidate of priced) {
    const id = candidate.state.workerId;
    if (candidate.extent < minBlocks) {
      reject(
        rejected,
        id,
        'too-short',
        `${candidate.extent} blocks beyond the destination's ${local}; router.minimum_transfer_prefix_blocks = ${minBlocks}`,
      );
    } else if (candidate.net < margin) {
      reject(
        rejected,
        id,
        'not-worth-it',
        `${describeNet(candidate)}; router.minimum_estimated_ttft_saving_ms = ${margin}`,
      );
    } else if (chosen === undefined) {
      chosen = candidate;
      chosenNet = `, less than ${id}'s ${round(candidate.net)} ms`;
    } else {
      reject(rejected, id, 'outbid', describeNet(candidate) + chosenNet);
    }
  }
  return chosen;
}

/** The decision when no source is chosen: why, from the best candidate when there is one. */
function declined(
  priced: readonly Priced[],
  router: RouteContext['settings']['router'],
  considered: number,
  rejected: readonly RejectedSource[],
): DecisionDraft {
  const minBlocks = router.minimumTransferPrefixBlocks;
  const margin = router.minimumEstimatedTtftSavingMs;
  const best = priced[0];
  if (best === undefined) {
    const detail =
      considered === 0
        ? 'no worker retains the first block of the prompt'
        : `none of the ${considered} workers that retain part of the prompt can serve it`;
    return recompute('no-candidate', detail, considered, rejected);
  }
  // Too short if even the longest candidate is; otherwise not worth it, shown by the best candidate long
  // enough (a shorter one may save more, and its net would not explain the margin).
  const longest = priced.reduce((a, b) => (b.extent > a.extent ? b : a));
  const tooShort = longest.extent < minBlocks;
  const shown = tooShort ? longest : (priced.find((candidate) => candidate.extent >= minBlocks) ?? best);
  const detail = tooShort
    ? `the longest retained prefix adds ${longest.extent} blocks; router.minimum_transfer_prefix_blocks = ${minBlocks}`
    : `the best source, ${shown.state.workerId}: ${describeNet(shown)}; router.minimum_estimated_ttft_saving_ms = ${margin}`;
  return pricedDecision(shown, 'recompute', tooShort ? 'too-short' : 'not-worth-it', detail, considered, rejected);
}

const noRejections: readonly RejectedSource[] = Object.freeze([]);

function recompute(
  reason: DecisionReason,
  detail: string,
  considered = 0,
  rejected: readonly RejectedSource[] = noRejections,
): DecisionDraft {
  return {
    action: 'recompute',
    reason,
    detail,
    extent: 0,
    savingMs: 0,
    costMs: 0,
    estimate: 'prior',
    prefillEstimate: 'prior',
    candidatesConsidered: considered,
    rejected,
  };
}

function exceeded(budget: LookupBudget, considered: number, rejected: readonly RejectedSource[]): DecisionDraft {
  const { fault } = budget;
  const why =
    fault === undefined
      ? `finding a source took longer than router.transfer_source_lookup_budget_ms = ${budget.budgetMs} ms`
      : fault.detail;
  const decision = recompute('budget-exceeded', `${why}: no source, the prefix is recomputed`, considered, rejected);
  if (fault !== undefined) decision.lookupFault = fault;
  return decision;
}

function reject(rejected: RejectedSource[], worker: string, reason: RejectionReason, detail: string): void {
  rejected.push({ worker, reason, detail });
}

function lookUp(inventory: RetainedInventory, chain: BigUint64Array | readonly bigint[]): AdvisoryRetainedPrefix[] {
  try {
    return inventory.longestRetainedPrefix(chain);
  } catch (error) {
    if (!(error instanceof InventoryEventError)) throw error;
    throw new RouteRequestError(error.path, error.value, error.reason, { cause: error });
  }
}

type DecisionDraft = { -readonly [Key in keyof RouteDecision]: RouteDecision[Key] };

/** A decision priced by `candidate` (built field by field: object spreads cost more than the rest of a decision). */
function pricedDecision(
  candidate: Priced,
  action: RouteDecision['action'],
  reason: DecisionReason,
  detail: string,
  considered: number,
  rejected: readonly RejectedSource[],
): DecisionDraft {
  const decision: DecisionDraft = {
    action,
    reason,
    detail,
    extent: candidate.extent,
    savingMs: candidate.savingMs,
    costMs: candidate.costMs,
    estimate: candidate.estimate,
    prefillEstimate: candidate.prefillEstimate,
    candidatesConsidered: considered,
    rejected,
  };
  if (candidate.cut !== undefined) decision.cut = candidate.cut;
  return decision;
}

/** To the microsecond: enough for an explanation, and much cheaper than `toPrecision`. */
const round = (ms: number): number => Math.round(ms * 1000) / 1000;

function describeNet(candidate: Priced): string {
  return `saves ${round(candidate.savingMs)} ms for ${round(candidate.costMs)} ms (${candidate.estimate} estimate), net ${round(candidate.net)} ms`;
}

/**
 * The prefix a pull may take, and its tier. With GPU reuse active, the whole retained prefix: `gpu` if
 * every block is on the GPU, `host` if every block is in host memory, `mixed` otherwise. Without it,
 * the leading run of blocks in host memory (`leadingHostBlocks`), from `host`.
 */
function usablePrefix(
  prefix: AdvisoryRetainedPrefix,
  gpu: boolean,
): { readonly tier: SourceTier; readonly blocks: number } {
  if (!gpu) return { tier: 'host', blocks: prefix.leadingHostBlocks };
  const tier = prefix.gpuBlocks === prefix.blocks ? 'gpu' : prefix.hostBlocks === prefix.blocks ? 'host' : 'mixed';
  return { tier, blocks: prefix.blocks };
}

function prefixCut(prefix: AdvisoryRetainedPrefix, usableBlocks: number, reasons: readonly string[]): PrefixCut {
  return {
    retainedBlocks: prefix.blocks,
    usableBlocks,
    reason: 'gpu-not-admitted',
    detail: `${prefix.workerId} retains ${prefix.blocks} leading blocks; only the first ${usableBlocks} are in host memory, block ${usableBlocks} is in GPU memory only, and GPU reuse is not active: ${reasons.join('; ')}`,
  };
}

/** Why blocks cannot move from the source to the destination, or undefined if they can. */
function incompatibility(
  sources: SourceBook,
  state: SourceState,
  destination: Worker,
  seed: string,
): string | undefined {
  // The block salt covers the KV content only: workers that lay their banks out differently share hashes
  // and meet here, where checkCompatibility says whether the blocks can move.
  const declared = state.blockHash;
  if (declared !== undefined && (declared.function !== blockHashFunction || declared.seed !== seed)) {
    return `${state.workerId} hashes blocks with ${declared.function} seeded ${JSON.stringify(declared.seed)}; the router with ${blockHashFunction} seeded ${JSON.stringify(seed)}`;
  }
  return sources.incompatibility(state, destination);
}

const activationModes: ReadonlySet<string> = new Set(['off', 'host-only', 'gpu']);

function checkContext(context: RouteContext): void {
  if (context === null || typeof context !== 'object') throw new RouterOptionError('context', context, 'an object');
  const { settings, inventory, sources, activation, clock } = context;
  if (settings?.router === undefined || settings.inventory === undefined) {
    throw new RouterOptionError(
      'context.settings',
      settings,
      'the resolved settings (resolveSettings of @kvreuse/config)',
    );
  }
  if (!(inventory instanceof RetainedInventory))
    throw new RouterOptionError('context.inventory', inventory, 'a RetainedInventory of @kvreuse/inventory');
  if (!(sources instanceof SourceBook)) throw new RouterOptionError('context.sources', sources, 'a SourceBook');
  if (activation === null || typeof activation !== 'object' || !activationModes.has(activation.mode)) {
    throw new RouterOptionError(
      'context.activation',
      activation,
      'an Activation (explainActivation of @kvreuse/profile-admission)',
    );
  }
  if (clock !== undefined && typeof clock !== 'function')
    throw new RouterOptionError('context.clock', clock, 'a function returning monotonic milliseconds');
}

function checkDestination(request: RouteRequest): RouteDestination {
  if (request === null || typeof request !== 'object') throw new RouteRequestError('request', request, 'an object');
  const { destination } = request;
  if (destination === null || typeof destination !== 'object')
    throw new RouteRequestError('destination', destination, 'an object');
  const { worker, localBlocks } = destination;
  if (
    worker === null ||
    typeof worker !== 'object' ||
    typeof worker.geometryDigest !== 'string' ||
    typeof worker.geometry !== 'object'
  ) {
    throw new RouteRequestError(
      'destination.worker',
      worker,
      'a complete worker descriptor (Worker of @kvreuse/descriptors)',
    );
  }
  if (!Number.isSafeInteger(localBlocks) || localBlocks < 0)
    throw new RouteRequestError('destination.localBlocks', localBlocks, 'a whole number ≥ 0');
  return destination;
}
