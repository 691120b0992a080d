// A rank's destination side: checks a pull before anything is pinned or posted, finds the source's
// ranks in discovery, loads their peers, pins at each, takes the rank pairs' templates from the
// endpoint's one cache, and hands the pull to `pullPinned` (`pullPrefix` without the checks its request passed).
import {
  checkCompatibility,
  type RankId,
  type RankPart,
  type TransferTemplate,
  type Worker,
} from '@kvreuse/descriptors';
import type { OperationLedger, PeerBook, PeerTicket } from '@kvreuse/drain';
import type { Agent, Peer, PostBlocksRequest, PostRequest, RegisteredTemplate } from '@kvreuse/native-bindings';
import type { ClusterSecret, ReadinessGate, WorkerReadiness } from '@kvreuse/discovery';
import type { RegisteredRank } from '@kvreuse/registry';
import { codeOf, messageOf } from '@kvreuse/errors';
import type { TransferCalibration } from '@kvreuse/router';
import type { RankBankBytes } from './block-checksum.js';
import { unlessAborted } from './abortable.js';
import { checkBlockLists } from './block-lists.js';
import { isChainHash } from './chain-hash.js';
import type { WorkerWatches } from './discovered-workers.js';
import {
  describeRank,
  EndpointOptionError,
  PinRefusedError,
  PullRefusedError,
  SourceUnresponsiveError,
} from './errors.js';
import { type PullPair, pullPinned } from './pull.js';
import { calibrationSample, type PullReceipt, PullShortfallError, type RecomputeReason } from './pull-receipt.js';
import { type PullRequest, type ShortfallPolicy, type VerifyMode, verifyModes } from './pull-request.js';
import type { EndpointMetrics } from './metrics.js';
import type { PeerTemplates } from './peer-templates.js';
import type { PeerHolds } from './peer-loads.js';
import type { PinClient } from './pin-client.js';
import { type HeldPin, releasePins } from './pins.js';
import type { RemotePeers } from './remote-peers.js';
import { loadSourcePeers } from './source-peer.js';
import { rankOf, sameRank } from './ranks.js';

export interface PullSideOptions {
  readonly agent: Pick<Agent, 'loadPeerInBackground' | 'peers' | 'blockChecksums'>;
  /** Sources' metadata is loaded only when signed under it. */
  readonly secret: ClusterSecret;
  readonly rank: RankId;
  readonly ledger: OperationLedger<PostRequest, PostBlocksRequest>;
  readonly peers: PeerBook;
  readonly pins: PinClient;
  /** The endpoint's readiness watches: the sources' are followed from their first pull. */
  readonly workers: WorkerWatches;
  readonly templates: PeerTemplates;
  /** The source ranks' peers, held from their load until the pull's pins are given back. */
  readonly remotePeers: RemotePeers;
  readonly admissionGate?: ReadinessGate;
  readonly bankBytes?: RankBankBytes;
  readonly defaultPolicy: ShortfallPolicy;
  /** A request's verification when it names none (the `endpoint.verify` setting). */
  readonly defaultVerify: VerifyMode;
  readonly metrics?: EndpointMetrics;
  /** Records each receipt that prices its blocks (`calibrationSample`). */
  readonly calibration?: Pick<TransferCalibration, 'record'>;
  /** Milliseconds, for the receipt's times (the endpoint's clock). */
  readonly now: () => number;
}

/** What the endpoint is when a pull arrives: its registered rank and its worker, once ready. */
export interface PullingRank {
  readonly registered: RegisteredRank;
  readonly readiness: WorkerReadiness;
}

const refuseSource = (why: string): Error => new PullRefusedError('source-not-ready', why);

/** A pull request as checked: the pull's own copy of the hint's blocks and hashes and of the destination blocks. */
interface CheckedRequest extends PullRequest {
  readonly hint: PullRequest['hint'] & { readonly hashes: BigUint64Array };
}

/**
 * The one check of a pull request's shape and block list; `pullPinned` trusts it. Answers the request with
 * copies of what the pull reads after it awaits: the caller changing its arrays meanwhile changes nothing.
 */
function checkedRequest(
  request: PullRequest,
  defaultVerify: VerifyMode,
): { request: CheckedRequest; verify: VerifyMode } {
  if (typeof request !== 'object' || request === null)
    throw new EndpointOptionError('request', request, 'a pull request { hint, destinationBlocks, … }');
  const { hint, destinationBlocks, signal } = request;
  if (typeof hint !== 'object' || hint === null || typeof hint.blocks !== 'object' || hint.blocks === null)
    throw new EndpointOptionError('request.hint', hint, "the router's pull hint (RouteDecision.source)");
  const { start, count } = hint.blocks;
  if (!Number.isSafeInteger(start) || start < 0 || start > 0xffffffff)
    throw new EndpointOptionError('request.hint.blocks.start', start, 'a whole number of blocks, 0 to 2^32 - 1');
  if (!Number.isSafeInteger(count) || count < 1)
    throw new EndpointOptionError('request.hint.blocks.count', count, 'a whole number of blocks, at least 1');
  const hashes = hashesOf(hint.hashes);
  if (!(destinationBlocks instanceof Uint32Array) || destinationBlocks.length !== count || hashes.length !== count) {
    throw new EndpointOptionError(
      'request.destinationBlocks',
      destinationBlocks,
      `a Uint32Array of one block per hinted block (${count}, with as many hashes)`,
    );
  }
  const verify = request.verify ?? defaultVerify;
  if (!verifyModes.includes(verify))
    throw new EndpointOptionError('request.verify', verify, "'full', 'sampled' or 'off'");
  if (request.sampleEvery !== undefined && (!Number.isSafeInteger(request.sampleEvery) || request.sampleEvery < 1)) {
    throw new EndpointOptionError('request.sampleEvery', request.sampleEvery, 'a positive integer');
  }
  if (request.policy !== undefined && !['fail', 'recompute'].includes(request.policy))
    throw new EndpointOptionError('request.policy', request.policy, "'fail' or 'recompute'");
  if (request.beforeRelease !== undefined && typeof request.beforeRelease !== 'function')
    throw new EndpointOptionError('request.beforeRelease', request.beforeRelease, 'a function (pins) => Promise');
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new EndpointOptionError('request.signal', signal, 'an AbortSignal');
  const checked = {
    ...request,
    hint: { ...hint, blocks: { start, count }, hashes },
    destinationBlocks: destinationBlocks.slice(),
  };
  return { request: checked, verify };
}

/** The hint's block hashes, copied; `EndpointOptionError` unless each is a bigint of 0 to 2^64 - 1. */
function hashesOf(hashes: unknown): BigUint64Array {
  if (hashes instanceof BigUint64Array) return hashes.slice();
  if (Array.isArray(hashes) && hashes.every(isChainHash)) return BigUint64Array.from(hashes as bigint[]);
  throw new EndpointOptionError(
    'request.hint.hashes',
    hashes,
    "the hinted blocks' hashes: a BigUint64Array or an array of bigints of 0 to 2^64 - 1",
  );
}

export class PullSide {
  readonly #options: PullSideOptions;
  /** The pins' releases of pulls that returned, until the sources answered them. */
  readonly #releases = new Set<Promise<void>>();

  constructor(options: PullSideOptions) {
    this.#options = options;
  }

  /** Resolves once the pins of every pull that returned so far are released (or failed to be). */
  async released(): Promise<void> {
    while (this.#releases.size > 0) await Promise.all([...this.#releases]);
  }

  #releaseLater(released: Promise<void>): void {
    this.#releases.add(released);
    void released.finally(() => this.#releases.delete(released));
  }

  /**
   * Pins the hint's blocks at every source rank: the pins granted, the refusals, and the round trip's time.
   * Rejects with the abort as soon as the request's signal aborts; the pins granted afterwards go to `releaseLater`.
   */
  async #pin(
    sources: ReadonlyMap<RankPart, { peer: Peer; ticket: PeerTicket }>,
    request: CheckedRequest,
    verify: VerifyMode,
    releaseLater: (released: Promise<void>) => void,
  ): Promise<{ pins: HeldPin[]; refusals: RecomputeReason[]; pinMs: number }> {
    const { hint, signal, beforeRelease } = request;
    signal?.throwIfAborted();
    const { now } = this.#options;
    const pinning = now();
    const answers = Promise.allSettled(
      [...sources].map(([part, { peer }]) =>
        this.#options.pins.pin({
          peer,
          source: { workerId: hint.workerId, incarnation: hint.incarnation, epoch: hint.epoch, rank: rankOf(part) },
          start: hint.blocks.start,
          hashes: hint.hashes,
          wantsChecksums: verify !== 'off',
        }),
      ),
    );
    const granted = (results: readonly PromiseSettledResult<HeldPin>[]): HeldPin[] =>
      results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    try {
      const pinned = await unlessAborted(answers, signal);
      signal?.throwIfAborted();
      return { pins: granted(pinned), refusals: pinRefusals(pinned, [...sources.keys()]), pinMs: now() - pinning };
    } catch (abort) {
      releaseLater(answers.then((pinned) => releasePins(granted(pinned), beforeRelease)));
      throw abort;
    }
  }

  async pull(given: PullRequest, rank: PullingRank | undefined): Promise<PullReceipt> {
    const { request, verify } = checkedRequest(given, this.#options.defaultVerify);
    const hostBanks = rank?.registered.banks.some((bank) => bank.memKind !== 'vram') ?? true;
    if (verify !== 'off' && this.#options.bankBytes === undefined && hostBanks) {
      throw new EndpointOptionError(
        'bankBytes',
        undefined,
        `this rank's bank bytes, to verify what arrives (verify is '${verify}'); or pull with verify 'off'`,
      );
    }
    const { hint } = request;
    const policy = request.policy ?? this.#options.defaultPolicy;
    if (rank === undefined || !rank.readiness.ready)
      throw new PullRefusedError('not-ready', 'this endpoint is not ready');
    const destination = rank.readiness.worker;
    const source = await this.#sourceWorker(hint);
    const compatibility = checkCompatibility(source, destination);
    if (!compatibility.ok)
      throw new PullRefusedError('incompatible', compatibility.reasons.map((reason) => reason.message).join('; '));
    await this.#checkAdmission(source, destination);
    request.signal?.throwIfAborted();

    const template = this.#options.templates.between(source, destination);
    // The source blocks are the grants' (block 0 is in every bank): only the destination blocks are known yet.
    const { destinationBlocks } = request;
    checkBlockLists(template, { sourceBlocks: new Uint32Array(destinationBlocks.length), destinationBlocks });
    this.#options.remotePeers.seen(source);
    const held: Peer[] = [];
    const releases: Promise<unknown>[] = [];
    try {
      const loading = this.#sourcesOf(template, source, held);
      // An aborted pull ends before its peers are loaded: they are given back once they are.
      releases.push(loading.catch(() => undefined));
      const sourcesOf = await unlessAborted(loading, request.signal);
      return await this.#pullFrom(request, rank, { verify, policy, template, ...sourcesOf }, (released) => {
        releases.push(released);
        this.#releaseLater(released);
      });
    } finally {
      this.#releaseLater(Promise.allSettled(releases).then(() => this.#options.remotePeers.release(held)));
    }
  }

  /** Pins at the source ranks, posts each pair's template and verifies; `releaseLater` takes the pins' releases. */
  async #pullFrom(
    request: CheckedRequest,
    rank: PullingRank,
    pull: {
      verify: VerifyMode;
      policy: ShortfallPolicy;
      template: TransferTemplate;
      pairIndexes: number[];
      sourceParts: RankPart[];
      sources: Map<RankPart, { peer: Peer; ticket: PeerTicket }>;
    },
    releaseLater: (released: Promise<void>) => void,
  ): Promise<PullReceipt> {
    const { hint } = request;
    const { verify, policy, template, pairIndexes, sourceParts, sources } = pull;
    const link = { linkClass: hint.linkClass, tier: hint.tier };
    const { pins, refusals, pinMs } = await this.#pin(sources, request, verify, releaseLater);
    // A drain that stopped waiting for this pull released the templates: its banks are about to go.
    const shortfalls = this.#options.templates.closed ? [...refusals, drainedWhilePinning] : refusals;
    if (shortfalls.length > 0) {
      releaseLater(releasePins(pins, request.beforeRelease));
      return this.#finish(refusedReceipt(hint.blocks.count, shortfalls, verify, link, pinMs), policy);
    }

    const acquired: RegisteredTemplate[] = [];
    try {
      const pairs = pairIndexes.map((pair, index): PullPair => {
        const part = sourceParts[index] as RankPart;
        const { peer, ticket } = sources.get(part) as { peer: Peer; ticket: PeerTicket };
        const registered = this.#options.templates.acquire({
          template,
          pair,
          direction: 'read',
          remote: part,
          peer,
          local: rank.registered,
          noRegion: refuseSource,
        });
        acquired.push(registered);
        return { template: registered, ticket, banks: rank.registered.banks, bytes: this.#options.bankBytes ?? [] };
      });
      const receipt = await pullPinned({
        ledger: this.#options.ledger,
        pairs,
        pins: pins as HeldPin[],
        destinationBlocks: request.destinationBlocks,
        verify,
        agent: this.#options.agent,
        policy: 'recompute',
        link,
        now: this.#options.now,
        ...(request.sampleEvery === undefined ? {} : { sampleEvery: request.sampleEvery }),
        ...(request.prediction === undefined ? {} : { prediction: request.prediction }),
        ...(request.beforeRelease === undefined ? {} : { beforeRelease: request.beforeRelease }),
        onReleasing: releaseLater,
      });
      return this.#finish({ ...receipt, phases: { pinMs, ...receipt.phases } }, policy);
    } catch (error) {
      await releasePins(pins, request.beforeRelease);
      throw error;
    } finally {
      for (const registered of acquired) this.#options.templates.release(registered);
    }
  }

  /**
   * The template's pairs that end at this rank, the source rank of each, and a peer (tracked in the
   * peer book) for each of those source ranks: each peer goes into `held` as it is held, for the pull to give back.
   */
  async #sourcesOf(
    template: TransferTemplate,
    source: Worker,
    held: Peer[],
  ): Promise<{
    pairIndexes: number[];
    sourceParts: RankPart[];
    sources: Map<RankPart, { peer: Peer; ticket: PeerTicket }>;
  }> {
    const pairIndexes = template.pairs.flatMap((route, pair) =>
      sameRank(route.destinationRank, this.#options.rank) ? [pair] : [],
    );
    const sourceParts = pairIndexes.map(
      (pair) =>
        source.ranks.find((part) =>
          sameRank(rankOf(part), (template.pairs[pair] as (typeof template.pairs)[number]).sourceRank),
        ) as RankPart,
    );
    const sources = new Map<RankPart, { peer: Peer; ticket: PeerTicket }>();
    const { agent, secret, remotePeers } = this.#options;
    const holds: PeerHolds = {
      hold: (remote, peer) => {
        remotePeers.hold(remote, peer);
        held.push(peer);
      },
    };
    const loaded = await loadSourcePeers(agent, new Set(sourceParts), secret, holds);
    for (const [part, peer] of loaded) {
      sources.set(part, { peer, ticket: this.#options.peers.track(part.transport.agentName, part.incarnation, peer) });
    }
    return { pairIndexes, sourceParts, sources };
  }

  #finish(receipt: PullReceipt, policy: ShortfallPolicy): PullReceipt {
    const { metrics, calibration } = this.#options;
    const sample = calibrationSample(receipt);
    if (sample !== undefined) calibration?.record(sample);
    if (receipt.blocks > 0)
      metrics?.transferCompleted({
        side: 'pull',
        blocks: receipt.blocks,
        bytes: receipt.bytes,
        durationMs: receipt.ms,
        tier: receipt.calibration.tier,
        linkClass: receipt.calibration.linkClass,
      });
    for (const reason of receipt.recomputed.reasons)
      metrics?.transferFailed('pull', reason.kind === 'operation-failed' ? reason.code : reason.kind);
    if (policy === 'fail' && receipt.blocks < receipt.requested) throw new PullShortfallError(receipt);
    return receipt;
  }

  /** The source worker as ready in discovery under the hinted incarnation and epoch. */
  async #sourceWorker(hint: PullRequest['hint']): Promise<Worker> {
    const readiness = await this.#options.workers.readiness(hint.workerId);
    if (!readiness.ready) {
      const gateName = this.#options.admissionGate?.name;
      const admission = readiness.reasons.find(
        (reason) => reason.kind === 'no-admission-gate' || (reason.kind === 'gate' && reason.gate === gateName),
      );
      if (admission !== undefined) throw new PullRefusedError('admission', admission.message);
      throw new PullRefusedError(
        'source-not-ready',
        `${hint.workerId}: ${readiness.reasons.map((reason) => reason.message).join('; ')}`,
      );
    }
    if (readiness.incarnation !== hint.incarnation || readiness.epoch !== hint.epoch) {
      throw new PullRefusedError(
        'source-not-ready',
        `${hint.workerId} is ready as incarnation ${readiness.incarnation} at epoch ${readiness.epoch}, not the hinted ${hint.incarnation} at epoch ${hint.epoch}`,
      );
    }
    return readiness.worker;
  }

  /** A `vram` bank on either side needs the admission gate, passing for both workers. */
  async #checkAdmission(source: Worker, destination: Worker): Promise<void> {
    const vram = firstVramBank(source) ?? firstVramBank(destination);
    if (vram === undefined) return;
    const gate = this.#options.admissionGate;
    if (gate === undefined)
      throw new PullRefusedError('admission', `${vram} is vram and no admission gate is installed`);
    for (const worker of [source, destination]) {
      const verdict = await Promise.resolve()
        .then(() => gate.evaluate(worker))
        .catch((error: unknown) => ({
          pass: false as const,
          reason: messageOf(error),
        }));
      if (!verdict.pass)
        throw new PullRefusedError('admission', `${gate.name} refused ${worker.workerId}: ${verdict.reason}`);
    }
  }
}

/** The first of `worker`'s banks in vram, described, if it has one. */
function firstVramBank(worker: Worker): string | undefined {
  for (const part of worker.ranks) {
    const index = part.banks.findIndex((bank) => bank.memKind === 'vram');
    if (index >= 0) return `${worker.workerId} ${describeRank(rankOf(part))} bank ${index}`;
  }
  return undefined;
}

/** A recompute reason for each source rank whose pin was refused or failed (`parts` in the order of `pinned`). */
function pinRefusals(pinned: readonly PromiseSettledResult<HeldPin>[], parts: readonly RankPart[]): RecomputeReason[] {
  return pinned.flatMap((result, index): RecomputeReason[] => {
    if (result.status === 'fulfilled') return [];
    const error: unknown = result.reason;
    const part = parts[index] as RankPart;
    const reason =
      error instanceof PinRefusedError || error instanceof SourceUnresponsiveError
        ? error.reason
        : (codeOf(error) ?? 'UNKNOWN');
    return [
      {
        kind: 'pin-refused',
        fromBlock: 0,
        sourceRank: rankOf(part),
        reason,
        detail: messageOf(error),
      },
    ];
  });
}

/** Why a pull posts nothing once its rank's drain went on without it (past the drain's deadline). */
const drainedWhilePinning: RecomputeReason = {
  kind: 'operation-failed',
  fromBlock: 0,
  pair: 0,
  code: 'DRAINING',
  detail: 'this rank drained while the pull pinned (past the drain deadline): nothing was posted',
};

function refusedReceipt(
  requested: number,
  reasons: readonly RecomputeReason[],
  verify: VerifyMode,
  link: { linkClass: PullReceipt['calibration']['linkClass']; tier: PullReceipt['calibration']['tier'] },
  pinMs: number,
): PullReceipt {
  return {
    requested,
    blocks: 0,
    bytes: 0,
    bytesMoved: 0,
    ms: 0,
    phases: { pinMs, verifyMs: 0, releaseMs: 0 },
    gbytesPerS: 0,
    verify,
    checkedBlocks: 0,
    recomputed: { fromBlock: 0, blocks: requested, reasons },
    calibration: { ...link, blocks: 0, bytes: 0, transferMs: 0 },
  };
}
