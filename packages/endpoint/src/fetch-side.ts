// A rank's destination side: checks a fetch before anything is pinned or posted, finds the source's
// ranks in discovery, loads their peers, pins at each, registers the rank pairs' templates once per
// source incarnation, and hands the pull to `fetchPrefix`.
import { buildTransferTemplate, checkCompatibility, type RankId, type RankPart, type TransferTemplate, type Worker } from '@kvreuse/descriptors';
import type { OperationLedger, PeerBook, PeerTicket } from '@kvreuse/drain';
import { type Agent, type Peer, type PostBlocksRequest, type PostRequest, type RegisteredTemplate } from '@kvreuse/native-bindings';
import {
  type ClusterSecret,
  type DiscoveryStore,
  type ReadinessGate,
  watchWorkerReadiness,
  type WorkerReadiness,
  type WorkerReadinessWatch,
} from '@kvreuse/discovery';
import { type RegisteredRank } from '@kvreuse/registry';
import type { TransferCalibration } from '@kvreuse/router';
import type { RankBankBytes } from './block-checksum.js';
import { describeRank, EndpointOptionError, FetchRefusedError, FetchShortfallError } from './errors.js';
import { type FetchPair, fetchPrefix, type ShortfallPolicy, type VerifyMode, verifyModes } from './fetch.js';
import { calibrationSample, type FetchReceipt, type RecomputeReason } from './fetch-receipt.js';
import type { FetchRequest } from './fetch-request.js';
import type { EndpointMetrics } from './metrics.js';
import type { PinClient } from './pin-client.js';
import { type HeldPin, releasePins } from './pins.js';
import { loadSourcePeers } from './source-peer.js';

export interface FetchSideOptions {
  readonly agent: Pick<Agent, 'loadPeer' | 'registerTemplate' | 'peers'>;
  readonly discovery: DiscoveryStore;
  /** Sources' metadata is loaded only when signed under it. */
  readonly secret: ClusterSecret;
  readonly keyPrefix?: string;
  readonly rank: RankId;
  readonly ledger: OperationLedger<PostRequest, PostBlocksRequest>;
  readonly peers: PeerBook;
  readonly pins: PinClient;
  readonly admissionGate?: ReadinessGate;
  readonly bankBytes?: RankBankBytes;
  readonly defaultPolicy: ShortfallPolicy;
  /** A request's verification when it names none (the `endpoint.verify` setting). */
  readonly defaultVerify: VerifyMode;
  readonly metrics?: EndpointMetrics;
  /** Records each receipt that prices its blocks (`calibrationSample`). */
  readonly calibration?: Pick<TransferCalibration, 'record'>;
}

/** What the endpoint is when a fetch arrives: its registered rank and its worker, once ready. */
export interface FetchingRank {
  readonly registered: RegisteredRank;
  readonly readiness: WorkerReadiness;
}

const sameRank = (a: RankId, b: RankId): boolean => a.tpRank === b.tpRank && a.ppRank === b.ppRank;
const rankOf = (part: RankPart): RankId => ({ tpRank: part.parallel.tpRank, ppRank: part.parallel.ppRank });

function checkRequest(request: FetchRequest, defaultVerify: VerifyMode): { verify: VerifyMode } {
  if (typeof request !== 'object' || request === null) throw new EndpointOptionError('request', request, 'a fetch request { hint, destinationBlocks, … }');
  const { hint, destinationBlocks } = request;
  if (typeof hint !== 'object' || hint === null) throw new EndpointOptionError('request.hint', hint, "the router's fetch hint (RouteDecision.source)");
  if (!(destinationBlocks instanceof Uint32Array) || destinationBlocks.length !== hint.blocks.count || hint.hashes.length !== hint.blocks.count) {
    throw new EndpointOptionError('request.destinationBlocks', destinationBlocks, `a Uint32Array of one block per hinted block (${hint.blocks.count}, with as many hashes)`);
  }
  const verify = request.verify ?? defaultVerify;
  if (!verifyModes.includes(verify)) throw new EndpointOptionError('request.verify', verify, "'full', 'sampled' or 'off'");
  if (request.policy !== undefined && !['fail', 'recompute'].includes(request.policy)) throw new EndpointOptionError('request.policy', request.policy, "'fail' or 'recompute'");
  if (request.beforeRelease !== undefined && typeof request.beforeRelease !== 'function') throw new EndpointOptionError('request.beforeRelease', request.beforeRelease, 'a function (pins) => Promise');
  return { verify };
}

export class FetchSide {
  readonly #options: FetchSideOptions;
  /** Readiness watches of the sources fetched from, by worker id. */
  readonly #sources = new Map<string, Promise<WorkerReadinessWatch>>();
  readonly #transferTemplates = new Map<string, TransferTemplate>();
  /** Templates registered per source incarnation, peer generation and pair. */
  readonly #templates = new Map<string, RegisteredTemplate>();

  constructor(options: FetchSideOptions) {
    this.#options = options;
  }

  async fetch(request: FetchRequest, rank: FetchingRank | undefined): Promise<FetchReceipt> {
    const { verify } = checkRequest(request, this.#options.defaultVerify);
    if (verify !== 'off' && this.#options.bankBytes === undefined) {
      throw new EndpointOptionError('bankBytes', undefined, `this rank's bank bytes, to verify what arrives (verify is '${verify}'); or fetch with verify 'off'`);
    }
    const { hint } = request;
    const policy = request.policy ?? this.#options.defaultPolicy;
    if (rank === undefined || !rank.readiness.ready) throw new FetchRefusedError('not-ready', 'this endpoint is not ready');
    const destination = rank.readiness.worker;
    const source = await this.#sourceWorker(hint);
    const compatibility = checkCompatibility(source, destination);
    if (!compatibility.ok) throw new FetchRefusedError('incompatible', compatibility.reasons.map((reason) => reason.message).join('; '));
    await this.#checkAdmission(source, destination);
    request.signal?.throwIfAborted();

    const template = this.#transferTemplate(source, destination);
    const pairIndexes = template.pairs.flatMap((route, pair) => (sameRank(route.destinationRank, this.#options.rank) ? [pair] : []));
    const sourceParts = pairIndexes.map((pair) => source.ranks.find((part) => sameRank(rankOf(part), (template.pairs[pair] as (typeof template.pairs)[number]).sourceRank)) as RankPart);
    const sources = new Map<RankPart, { peer: Peer; ticket: PeerTicket }>();
    for (const [part, peer] of loadSourcePeers(this.#options.agent, new Set(sourceParts), this.#options.secret)) {
      sources.set(part, { peer, ticket: this.#options.peers.track(part.transport.agentName, part.incarnation, peer) });
    }

    const link = { linkClass: hint.linkClass, tier: hint.tier };
    const hashes = hint.hashes instanceof BigUint64Array ? hint.hashes : BigUint64Array.from(hint.hashes);
    const pinned = await Promise.allSettled(
      [...sources].map(([part, { peer }]) =>
        this.#options.pins.pin({
          peer,
          source: { workerId: hint.workerId, incarnation: hint.incarnation, epoch: hint.epoch, rank: rankOf(part) },
          start: hint.blocks.start,
          hashes,
          wantsChecksums: verify !== 'off',
        }),
      ),
    );
    const pins = pinned.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    this.#options.metrics?.pinsHeld('pull', this.#options.pins.heldPins);
    const refusals = pinned.flatMap((result, index): RecomputeReason[] => {
      if (result.status === 'fulfilled') return [];
      const error = result.reason as Error & { code?: string; reason?: string };
      const part = [...sources.keys()][index] as RankPart;
      return [{ kind: 'pin-refused', fromBlock: 0, sourceRank: rankOf(part), reason: error.reason ?? error.code ?? 'UNKNOWN', detail: error.message }];
    });
    if (refusals.length > 0 || request.signal?.aborted === true) {
      await releasePins(pins, request.beforeRelease);
      request.signal?.throwIfAborted();
      return this.#finish(refusedReceipt(hint.blocks.count, refusals, verify, link), policy);
    }

    try {
      const pairs = pairIndexes.map((pair, index): FetchPair => {
        const part = sourceParts[index] as RankPart;
        const { peer, ticket } = sources.get(part) as { peer: Peer; ticket: PeerTicket };
        return { template: this.#template(template, pair, part, peer, rank.registered), ticket, banks: rank.registered.banks, bytes: this.#options.bankBytes ?? [] };
      });
      const receipt = await fetchPrefix({
        ledger: this.#options.ledger,
        pairs,
        pins: pins as HeldPin[],
        destinationBlocks: request.destinationBlocks,
        verify,
        policy: 'recompute',
        link,
        ...(request.sampleEvery === undefined ? {} : { sampleEvery: request.sampleEvery }),
        ...(request.prediction === undefined ? {} : { prediction: request.prediction }),
        ...(request.beforeRelease === undefined ? {} : { beforeRelease: request.beforeRelease }),
      });
      return this.#finish(receipt, policy);
    } catch (error) {
      await releasePins(pins, request.beforeRelease);
      throw error;
    }
  }

  /** Stops following sources and releases the registered templates (at drain: before any deregistration). */
  async close(): Promise<void> {
    for (const registered of this.#templates.values()) registered.release();
    this.#templates.clear();
    const watches = await Promise.allSettled(this.#sources.values());
    this.#sources.clear();
    for (const watch of watches) if (watch.status === 'fulfilled') await watch.value.close();
  }

  #finish(receipt: FetchReceipt, policy: ShortfallPolicy): FetchReceipt {
    const { metrics, calibration } = this.#options;
    metrics?.pinsHeld('pull', this.#options.pins.heldPins);
    const sample = calibrationSample(receipt);
    if (sample !== undefined) calibration?.record(sample);
    if (receipt.blocks > 0) metrics?.transferCompleted({ side: 'pull', blocks: receipt.blocks, bytes: receipt.bytes, durationMs: receipt.ms, tier: receipt.calibration.tier, linkClass: receipt.calibration.linkClass });
    for (const reason of receipt.recomputed.reasons) metrics?.transferFailed('pull', reason.kind === 'operation-failed' ? reason.code : reason.kind);
    if (policy === 'fail' && receipt.blocks < receipt.requested) throw new FetchShortfallError(receipt);
    return receipt;
  }

  /** The source worker as ready in discovery under the hinted incarnation and epoch. */

  async #sourceWorker(hint: FetchRequest['hint']): Promise<Worker> {
    let watching = this.#sources.get(hint.workerId);
    if (watching === undefined) {
      const { discovery, admissionGate, keyPrefix } = this.#options;
      watching = watchWorkerReadiness(discovery, hint.workerId, {
        onChange: () => undefined,
        ...(admissionGate === undefined ? {} : { admissionGate }),
        ...(keyPrefix === undefined ? {} : { keyPrefix }),
      });
      this.#sources.set(hint.workerId, watching);
      watching.catch(() => this.#sources.delete(hint.workerId));
    }
    const watch = await watching;
    await watch.settled();
    const readiness = watch.current;
    if (!readiness.ready) {
      const gateName = this.#options.admissionGate?.name;
      const admission = readiness.reasons.find((reason) => reason.kind === 'no-admission-gate' || (reason.kind === 'gate' && reason.gate === gateName));
      if (admission !== undefined) throw new FetchRefusedError('admission', admission.message);
      throw new FetchRefusedError('source-not-ready', `${hint.workerId}: ${readiness.reasons.map((reason) => reason.message).join('; ')}`);
    }
    if (readiness.incarnation !== hint.incarnation || readiness.epoch !== hint.epoch) {
      throw new FetchRefusedError('source-not-ready', `${hint.workerId} is ready as incarnation ${readiness.incarnation} at epoch ${readiness.epoch}, not the hinted ${hint.incarnation} at epoch ${hint.epoch}`);
    }
    return readiness.worker;
  }

  /** A `vram` bank on either side needs the admission gate, passing for both workers. */
  async #checkAdmission(source: Worker, destination: Worker): Promise<void> {
    const vram = [source, destination].flatMap((worker) =>
      worker.ranks.flatMap((part) => part.banks.flatMap((bank, index) => (bank.memKind === 'vram' ? [`${worker.workerId} ${describeRank(rankOf(part))} bank ${index}`] : []))),
    );
    if (vram.length === 0) return;
    const gate = this.#options.admissionGate;
    if (gate === undefined) throw new FetchRefusedError('admission', `${vram[0]} is vram and no admission gate is installed`);
    for (const worker of [source, destination]) {
      const verdict = await Promise.resolve()
        .then(() => gate.evaluate(worker))
        .catch((error: unknown) => ({ pass: false as const, reason: error instanceof Error ? error.message : String(error) }));
      if (!verdict.pass) throw new FetchRefusedError('admission', `${gate.name} refused ${worker.workerId}: ${verdict.reason}`);
    }
  }

  /** The transfer template from the source incarnation to this worker, built once per source incarnation. */
  #transferTemplate(source: Worker, destination: Worker): TransferTemplate {
    const key = `${source.workerId}/${source.incarnation}`;
    const known = this.#transferTemplates.get(key);
    if (known !== undefined) return known;
    const built = buildTransferTemplate(source, destination);
    this.#transferTemplates.set(key, built);
    return built;
  }

  /** The pair's template on this agent, registered once per source incarnation and peer generation. */
  #template(template: TransferTemplate, pair: number, part: RankPart, peer: Peer, registered: RegisteredRank): RegisteredTemplate {
    const key = `${part.workerId}/${part.incarnation}/${peer.generation}/${pair}`;
    const known = this.#templates.get(key);
    if (known !== undefined) return known;
    const advertised = peer.regions();
    const remoteRegions = part.banks.map((bank, index) => {
      const region = advertised.find((candidate) => candidate.address === BigInt(bank.address));
      if (region === undefined) throw new FetchRefusedError('source-not-ready', `${part.workerId} ${describeRank(rankOf(part))} advertises no region for its bank ${index}`);
      return region.id;
    });
    const localRegions = registered.banks.map((bank) => bank.region as NonNullable<typeof bank.region>);
    const created = this.#options.agent.registerTemplate({ peer, template, pair, direction: 'read', localRegions, remoteRegions });
    this.#templates.set(key, created);
    return created;
  }
}

function refusedReceipt(requested: number, reasons: readonly RecomputeReason[], verify: VerifyMode, link: { linkClass: FetchReceipt['calibration']['linkClass']; tier: FetchReceipt['calibration']['tier'] }): FetchReceipt {
  return {
    requested,
    blocks: 0,
    bytes: 0,
    bytesMoved: 0,
    ms: 0,
    gbps: 0,
    verify,
    checkedBlocks: 0,
    recomputed: { fromBlock: 0, blocks: requested, reasons },
    calibration: { ...link, blocks: 0, bytes: 0, transferMs: 0 },
  };
}
