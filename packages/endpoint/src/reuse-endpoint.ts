// One rank's reuse endpoint, the front door of a rank: its banks laid out, allocated and registered with
// its agent, its rank part published under a lease, its worker's readiness followed, its pulls, pushes
// and inventory, its operations recorded in a ledger, and its drain and shutdown in the drain package's
// source-first order — each step a lifecycle transition.
import {
  type Clock,
  DrainController,
  type DrainReport,
  OperationLedger,
  PeerBook,
  type ShutdownResult,
  systemClock,
} from '@kvreuse/drain';
import { messageOf } from '@kvreuse/errors';
import type { PostBlocksRequest, PostRequest } from '@kvreuse/native-bindings';
import type { WorkerReadiness } from '@kvreuse/discovery';
import { type RetentionTier } from '@kvreuse/inventory';
import { type RegisteredRank, registerRank, releaseBanks } from '@kvreuse/registry';
import type { RankBankBytes } from './block-checksum.js';
import { WorkerWatches } from './discovered-workers.js';
import {
  checkedRegisterOptions,
  checkOptions,
  checkTimeoutMs,
  deadlineOf,
  ownedOptions,
  type ReuseEndpointOptions,
} from './endpoint-options.js';
import { allocateBanks } from './allocated-banks.js';
import { deferred } from './deferred.js';
import { EndpointPublication } from './endpoint-publication.js';
import { EndpointOptionError } from './errors.js';
import type { PullReceipt } from './pull-receipt.js';
import type { PullRequest } from './pull-request.js';
import { PullSide } from './pull-side.js';
import { NotificationRouter } from './notification-router.js';
import { PeerTemplates } from './peer-templates.js';
import { RemotePeers } from './remote-peers.js';
import { PinChannel, type PinMessageRefusal } from './pin-auth.js';
import { PinClient } from './pin-client.js';
import type { PinServer, ServedPin } from './pin-server.js';
import { type PushReceipt, type PushRequest, PushSide } from './push-side.js';
import type { SourceSide } from './source-side.js';
import {
  EndpointLifecycle,
  EndpointNotReadyError,
  type EndpointState,
  EndpointStateError,
  endpointStates,
  type EndpointTransition,
} from './lifecycle.js';
import type { EndpointMetrics, MetricsListener } from './metrics.js';

/** The drain's report, with each pin this rank's readers held when the drain began waiting and how it ended. */
export interface EndpointDrainReport extends DrainReport {
  /** Empty when this rank does not serve or no pin was held. */
  readonly pins: readonly ServedPin[];
}

/** What `close()` resolves with: the shutdown's result, its drain report listing the pins waited for. */
export interface EndpointShutdownResult extends ShutdownResult {
  readonly report: EndpointDrainReport;
}

/** A ready endpoint: what `whenReady()` resolves with and `readyRank` returns. */
export interface ReadyRank {
  /** The epoch discovery handed this incarnation at `publish()`. */
  readonly epoch: number;
  readonly registered: RegisteredRank;
  /** The worker's readiness: ready, as this incarnation. */
  readonly readiness: Extract<WorkerReadiness, { readonly ready: true }>;
}

/**
 * `ReuseEndpoint.open`'s options: the endpoint's, with the rank's banks either laid out from the worker's
 * geometry and allocated by its agent (`blocks` per bank; kvreuse owns the memory and frees it when the
 * banks are handed back) or adopted by the caller (`banks`, with their `bankBytes`).
 */
export type OpenRankOptions = Omit<ReuseEndpointOptions, 'banks' | 'bankBytes'> &
  ({ readonly blocks: number } | Pick<ReuseEndpointOptions, 'banks' | 'bankBytes'>) & {
    /** How long the registration may take (`register({ timeoutMs })`). */
    readonly registerTimeoutMs?: number;
  };

/** The rank's pin channel (its refusals counted in the metrics) and its pin client. */
function pinsOf(options: ReuseEndpointOptions, clock: Clock): { channel: PinChannel; client: PinClient } {
  const { agent, secret, metrics, worker, rank } = options;
  const channel = new PinChannel({
    agent,
    secret,
    ...(metrics === undefined ? {} : { onRefused: (reason: PinMessageRefusal) => metrics.pinMessageRefused(reason) }),
  });
  const client = new PinClient({
    channel,
    reader: { workerId: worker.workerId, incarnation: worker.incarnation, rank },
    answerTimeoutMs: options.settings.transport.abandonTimeoutMs,
    clock,
    ...(metrics === undefined ? {} : { onHeldChange: (held: number) => metrics.pinsHeld('pull', held) }),
  });
  return { channel, client };
}

/**
 * One rank of a worker, as its own process runs it: `register()` → `publish()` → ready (when every rank
 * of the worker is published and every gate passes; `whenReady()`) → `drain()` → `close()`. Every
 * transition is reported (`onTransition`); a call the state does not allow throws `EndpointStateError`
 * and changes nothing. A failed registration leaves every bank with its owner and the endpoint
 * `created`; a failed publication leaves it `registered`; both can be retried. It keeps its own copy of
 * the options' data: the caller changing those objects afterwards changes nothing it was given.
 */
export class ReuseEndpoint {
  readonly #options: ReuseEndpointOptions;
  readonly #lifecycle = new EndpointLifecycle();
  readonly #clock: Clock;
  /** Peers this rank reads from; the pull records each with the incarnation it announced. */
  readonly peers: PeerBook;
  /** Every native operation this rank posts; drains wait for them, quarantine the ones that never end. */
  readonly ledger: OperationLedger<PostRequest, PostBlocksRequest>;
  readonly #drain: DrainController<PostRequest>;
  readonly #notifications = new NotificationRouter();
  readonly #pinChannel: PinChannel;
  readonly #pinClient: PinClient;
  readonly #pullSide: PullSide;
  readonly #pushSide: PushSide;
  /** The workers this rank transfers with, followed in discovery from the first transfer on. */
  readonly #workers: WorkerWatches;
  readonly #templates: PeerTemplates;
  /** The peers of the remote ranks this rank transfers with or serves: those of restarted workers are unloaded. */
  readonly #remotePeers: RemotePeers;
  /** The pulls and pushes that began and have not returned: a drain waits for them before it closes the templates. */
  readonly #transfers = new Set<Promise<unknown>>();
  readonly #publication: EndpointPublication;
  #registered: RegisteredRank | undefined;
  #shutdown: Promise<EndpointShutdownResult> | undefined;
  /** Settles once the register(), publish() or drain() under way has ended, either way: a close() waits for it. */
  #actUnderWay: Promise<void> | undefined;
  /** Aborted by the first close() that takes its options: later acts are refused, and a publication under way stops. */
  readonly #closeCalled = new AbortController();
  #metricsListener: MetricsListener | undefined;

  constructor(options: ReuseEndpointOptions) {
    checkOptions(options);
    const own = ownedOptions(options);
    this.#options = own;
    this.#clock = own.clock ?? systemClock;
    this.peers = new PeerBook(() => this.#clock.now());
    this.ledger = new OperationLedger<PostRequest, PostBlocksRequest>({
      agent: own.agent,
      peers: this.peers,
      timeouts: own.settings.transport,
      clock: this.#clock,
    });
    this.#drain = this.#drainController(own);
    const { worker, rank, agent, discovery, secret, keyPrefix, admissionGate, bankBytes, metrics, calibration } = own;
    const pins = pinsOf(own, this.#clock);
    this.#pinChannel = pins.channel;
    this.#pinClient = pins.client;
    this.#notifications.addHandler((notification) => this.#pinClient.receive(notification));
    this.#notifications.addPeerEventHandler((event) => this.#pinClient.peerEvent(event));
    this.#remotePeers = new RemotePeers(agent, (peer) => this.peers.forget(peer.name, peer));
    const remotePeers = this.#remotePeers;
    this.#workers = new WorkerWatches(discovery, {
      onReady: (worker) => remotePeers.seen(worker),
      ...(admissionGate === undefined ? {} : { admissionGate }),
      ...(keyPrefix === undefined ? {} : { keyPrefix }),
    });
    this.#templates = new PeerTemplates(agent);
    this.#pushSide = new PushSide({
      agent,
      secret,
      rank,
      ledger: this.ledger,
      peers: this.peers,
      workers: this.#workers,
      templates: this.#templates,
      remotePeers,
    });
    this.#pullSide = new PullSide({
      agent,
      secret,
      rank,
      ledger: this.ledger,
      peers: this.peers,
      pins: this.#pinClient,
      workers: this.#workers,
      templates: this.#templates,
      remotePeers,
      defaultPolicy: own.settings.drain?.failedLoadPolicy ?? 'recompute',
      defaultVerify: own.settings.endpoint?.verify ?? 'full',
      now: () => this.#clock.now(),
      ...(admissionGate === undefined ? {} : { admissionGate }),
      ...(bankBytes === undefined ? {} : { bankBytes }),
      ...(metrics === undefined ? {} : { metrics }),
      ...(calibration === undefined ? {} : { calibration }),
    });
    this.#publication = new EndpointPublication({
      options: own,
      closeCalled: this.#closeCalled.signal,
      pinChannel: this.#pinChannel,
      notifications: this.#notifications,
      templates: this.#templates,
      remotePeers,
      clock: this.#clock,
      onReadiness: (readiness) => this.#onReadiness(readiness),
    });
    if (metrics !== undefined) this.#lifecycle.onTransition(({ to }) => metrics.state(to));
  }

  /** The drain of this rank: the publication's withdrawals and, for a serving rank, its pin server's wait for readers. */
  #drainController(own: ReuseEndpointOptions): DrainController<PostRequest> {
    const { withdrawInventory, waitForReaders } = own;
    return new DrainController<PostRequest>({
      ledger: this.ledger,
      shutdownDeadlineMs: own.settings.transport.shutdownDeadlineMs,
      agent: own.agent,
      withdrawRankParts: ({ signal }) => this.#publication.withdraw(signal),
      ...(own.serve === undefined && withdrawInventory === undefined
        ? {}
        : {
            withdrawInventory: async () => {
              await this.#publication.sourceSide?.withdrawInventory();
              await withdrawInventory?.();
            },
          }),
      ...(own.serve !== undefined
        ? {
            waitForReaders: (wait) =>
              this.#publication.sourceSide?.waitForReaders(wait) ??
              Promise.resolve({ released: 0, lapsed: 0, outstanding: 0 }),
          }
        : waitForReaders === undefined
          ? {}
          : { waitForReaders }),
    });
  }

  /**
   * Opens a rank: lays out its banks from the worker's geometry and allocates them with its agent (or
   * takes the adopted `banks`), registers them all or none, publishes its rank part and resolves with
   * the published endpoint (`whenReady()` says when its worker is ready). A refused option
   * (`EndpointOptionError`) takes nothing: the agent stays open and adopted `banks` stay the caller's,
   * untouched (to open again, or to hand back with `releaseBanks`). A failed allocation leaves nothing
   * allocated and the agent open. Once its options are accepted the endpoint owns the agent and the banks:
   * a failed registration or publication closes the endpoint, the banks go back to their owners and the
   * agent closes.
   */
  static async open(options: OpenRankOptions): Promise<ReuseEndpoint> {
    if (typeof options !== 'object' || options === null)
      throw new EndpointOptionError('options', options, 'an options object');
    const { registerTimeoutMs, ...rest } = options;
    checkTimeoutMs('registerTimeoutMs', registerTimeoutMs);
    const endpoint = 'blocks' in rest ? await ReuseEndpoint.#allocated(rest) : new ReuseEndpoint(rest);
    try {
      await endpoint.register(registerTimeoutMs === undefined ? {} : { timeoutMs: registerTimeoutMs });
      await endpoint.publish();
    } catch (error) {
      await endpoint.close().catch(() => undefined);
      throw error;
    }
    return endpoint;
  }

  /** An endpoint over banks laid out and allocated for it; a refused option frees them again. */
  static async #allocated(
    options: Omit<OpenRankOptions, 'registerTimeoutMs'> & { readonly blocks: number },
  ): Promise<ReuseEndpoint> {
    if ('banks' in options)
      throw new EndpointOptionError(
        'banks',
        options.banks,
        'left out when open() allocates the banks (blocks is given)',
      );
    const { blocks, ...rest } = options;
    const allocated = await allocateBanks({ ...rest, blocks });
    try {
      return new ReuseEndpoint({ ...rest, ...allocated });
    } catch (error) {
      await releaseBanks(allocated.banks);
      throw error;
    }
  }

  get state(): EndpointState {
    return this.#lifecycle.state;
  }

  /** This rank's bank bytes, by bank number (the allocated banks' views when `open` allocated them). */
  get bankBytes(): RankBankBytes | undefined {
    return this.#options.bankBytes;
  }

  /** The registered rank, once `register()` succeeded. */
  get registered(): RegisteredRank | undefined {
    return this.#registered;
  }

  /** The worker's readiness as last seen, once published. */
  get readiness(): WorkerReadiness | undefined {
    return this.#publication.readiness;
  }

  /** The epoch discovery handed this incarnation, once published (`readyRank.epoch` once ready). */
  get epoch(): number | undefined {
    return this.#publication?.epoch;
  }

  /** The ready endpoint's epoch, registered rank and readiness; `EndpointStateError` naming the state unless it is `ready`. */
  get readyRank(): ReadyRank {
    this.#lifecycle.require('readyRank', ['ready']);
    return {
      epoch: this.#publication.epoch as number,
      registered: this.#registered as RegisteredRank,
      readiness: this.#publication.readiness as ReadyRank['readiness'],
    };
  }

  /**
   * Resolves with `readyRank` once the endpoint is ready (at once if it is). Rejects with
   * `EndpointNotReadyError` naming the state and why if, first, its registration or publication fails or
   * it drains or closes (at once if it already does): then only another call could make it ready.
   */
  whenReady(): Promise<ReadyRank> {
    const state = this.#lifecycle.state;
    if (state === 'ready') return Promise.resolve(this.readyRank);
    if (!['created', 'registering', 'registered', 'publishing', 'published'].includes(state)) {
      return Promise.reject(new EndpointNotReadyError(state, 'whenReady() once it no longer could be'));
    }
    return new Promise((resolve, reject) => {
      const stop = this.#lifecycle.onTransition(({ from, to, reason }) => {
        if (to === 'ready') {
          // A listener told before this one moved it on already: the transition after settles it.
          if (this.#lifecycle.state !== 'ready') return;
          resolve(this.readyRank);
        } else if (
          to === 'draining' ||
          to === 'closing' ||
          (from === 'registering' && to === 'created') ||
          (from === 'publishing' && to === 'registered')
        ) {
          reject(new EndpointNotReadyError(to, reason));
        } else return;
        stop();
      });
    });
  }

  /** The metrics listener, from `register()` to `close()` when `settings.endpoint.metricsPort` is set: where it listens (`host`, `port`, `url`). */
  get metricsListener(): MetricsListener | undefined {
    return this.#metricsListener;
  }

  /**
   * Pulls the prefix the router chose from its source into this rank's banks and returns the receipt.
   * Before anything is pinned or posted it refuses, with `PullRefusedError` naming the reason, when this
   * endpoint is not ready (`not-ready`), the source is not ready in discovery under the hinted
   * incarnation and epoch (`source-not-ready`), the two workers are not compatible (`incompatible`),
   * a `vram` bank takes part without the admission gate passing (`admission`), or a source rank's
   * transport metadata is refused (`metadata-refused`: unsigned, signed with another cluster secret or
   * for another rank part, the `TransportMetadataRefusedError` as its cause; or refused by the native
   * layer — another backend or format, an older generation, malformed — the `NativeTransportError` as its
   * cause), or a source rank's agent cannot be reached although discovery still lists it
   * (`source-unreachable`: its process died before its lease lapsed, or it is a loopback agent of another
   * process; the `NativeTransportError` as its cause). Then it loads the source
   * ranks' peers (all or none: refused at one source rank, it unloads the peers it loaded itself and
   * leaves those loaded before it), pins at every source rank this rank reads from (renewed while it runs), posts the
   * prepared template of each rank pair (registered once per source incarnation), waits, verifies,
   * keeps the longest verified prefix and resolves, the pins' release going on without it once the
   * operations are quiescent (`pinsReleased()`). A
   * refused or lost pin, a failed operation or a checksum mismatch ends in the policy's outcome:
   * `recompute` returns the receipt with what to recompute and why; `fail` throws `PullShortfallError` carrying it.
   * A drain waits for a pull in flight, at most its deadline; a pull still pinning when the drain goes on
   * without it posts nothing (`operation-failed`, code `DRAINING`) and gives its pins back. One called once
   * `close()` was, wherever the close has got to, is refused with `EndpointStateError` naming `closing`
   * (`closed` once the close ended) before anything is checked, pinned or posted.
   */
  pull(request: PullRequest): Promise<PullReceipt> {
    const refused = this.#refusalOnceClosing('pull', ['ready']);
    if (refused !== undefined) return Promise.reject(refused);
    const ready = this.#lifecycle.state === 'ready';
    return this.#inFlight(this.#pullSide.pull(request, ready ? this.readyRank : undefined));
  }

  /**
   * Once close() was called, wherever the close has got to, the refusal of `operation` (allowed only in
   * `allowed`): `EndpointStateError` naming `closing`, `closed` once the close ended.
   */
  #refusalOnceClosing(operation: string, allowed: readonly EndpointState[]): EndpointStateError | undefined {
    if (!this.#closeCalled.signal.aborted) return undefined;
    return new EndpointStateError(operation, this.#lifecycle.state === 'closed' ? 'closed' : 'closing', allowed);
  }

  #inFlight<T>(transfer: Promise<T>): Promise<T> {
    this.#transfers.add(transfer);
    const ended = () => this.#transfers.delete(transfer);
    transfer.then(ended, ended);
    return transfer;
  }

  /**
   * Resolves once the pins of every pull that returned so far are given back: a pull resolves once
   * verified, and its pins' release (after `beforeRelease`) goes on without it. `drain()` and `close()`
   * wait for the same, and for the pulls and pushes in flight, at most their deadline. Never rejects: a
   * source that does not answer lets its pins' leases lapse.
   */
  pinsReleased(): Promise<void> {
    return this.#pullSide.released();
  }

  /**
   * Writes this rank's `sourceBlocks` into `destinationBlocks` of every rank of the ready worker
   * `workerId` that this rank pairs with (the WRITE hand-off of a prompt's KV, e.g. prefill → decode),
   * each rank pair's template registered once per destination incarnation, every post on the ledger (a
   * drain waits for the push, at most its deadline), from its own copy of the block lists. Only while
   * ready and before `close()` (`EndpointStateError`; once `close()` was called, wherever the close has got
   * to, it names `closing`, and `closed` once the close ended); block lists of different lengths, a block outside the banks or a
   * destination block named twice are refused before any block is written (`EndpointOptionError`);
   * `PushFailedError` when the destination is not ready or a WRITE fails;
   * `DrainingError` (`DRAINING`) for the blocks left once a drain went on without it.
   */
  async push(request: PushRequest): Promise<PushReceipt> {
    this.#requireBeforeClose('push', ['ready']);
    const { registered, readiness } = this.readyRank;
    return this.#inFlight(this.#pushSide.push(request, { registered, worker: readiness.worker }));
  }

  /**
   * Announces `blocks` as this worker's retained inventory on `tier`, complete, until `ttlMs` from now:
   * for a serving rank without `serve.inventory` that retains blocks once it is ready (e.g. one rank per
   * worker, after a hand-off). The announcement lives under a lease of its own (granted once; announcements
   * made at once share it) and is withdrawn, its lease revoked, at the drain's inventory step, which waits
   * for an announcement still in flight. Only while ready and before `close()` (`EndpointStateError`; once
   * `close()` was called, wherever the close has got to, it names `closing`, and `closed` once the close
   * ended). `blocks` and the options
   * are read at the call: changing them while it runs changes nothing.
   */
  async announceInventory(
    blocks: readonly bigint[],
    options: { readonly tier: RetentionTier; readonly ttlMs: number },
  ): Promise<void> {
    this.#requireBeforeClose('announceInventory', ['ready']);
    const { serve } = this.#options;
    if (serve === undefined || serve.inventory !== undefined)
      throw new EndpointOptionError(
        'serve',
        serve,
        'a serving rank without serve.inventory: it publishes the inventory announceInventory would',
      );
    if (!Array.isArray(blocks) || blocks.some((hash) => typeof hash !== 'bigint'))
      throw new EndpointOptionError('blocks', blocks, 'an array of block hashes (bigint)');
    if (!['gpu', 'host'].includes(options?.tier) || !Number.isSafeInteger(options.ttlMs) || options.ttlMs < 1) {
      throw new EndpointOptionError('options', options, "{ tier: 'gpu' | 'host', ttlMs: whole milliseconds ≥ 1 }");
    }
    await (this.#publication.sourceSide as SourceSide).announce(blocks, options);
  }

  /** Pin messages this rank's agent refused (its pin client's and its pin server's), by reason. */
  get refusedPinMessages(): Readonly<Record<PinMessageRefusal, number>> {
    return this.#pinChannel.refusedMessages;
  }

  /** The pin server, once a serving rank is published. */
  get pinServer(): PinServer | undefined {
    return this.#publication.sourceSide?.server;
  }

  /** The one consumer of this rank's agent notifications (started at `publish()`); other message kinds may add handlers. */
  get notifications(): NotificationRouter {
    return this.#notifications;
  }

  onTransition(listener: (transition: EndpointTransition) => void): () => void {
    return this.#lifecycle.onTransition(listener);
  }

  /**
   * Serves the metrics when `settings.endpoint.metricsPort` is set (once: a retry keeps the listener;
   * `MetricsPortError` for a port in use), then registers every bank with the agent, all or nothing (`registerRank`).
   * Options that are no object, a `timeoutMs` that is not a positive number of milliseconds or a `signal`
   * that is no `AbortSignal` are refused (`EndpointOptionError`) before anything moves. A `close()` stops it
   * as `signal` would, before the next bank: what it registered is rolled back and it rejects with
   * `EndpointStateError` naming `closing`.
   */
  async register(
    options: { readonly timeoutMs?: number; readonly signal?: AbortSignal } = {},
  ): Promise<RegisteredRank> {
    this.#requireBeforeClose('register', ['created']);
    const registration = checkedRegisterOptions(options);
    return this.#act(async () => {
      this.#lifecycle.move('registering', 'register()');
      let registered: RegisteredRank;
      try {
        const { agent, banks, metrics, settings } = this.#options;
        const port = settings.endpoint?.metricsPort ?? 0;
        if (port !== 0)
          this.#metricsListener ??= await (metrics as EndpointMetrics).listen(port, settings.endpoint?.metricsHost);
        const closeCalled = this.#closeCalled.signal;
        const signal =
          registration.signal === undefined ? closeCalled : AbortSignal.any([registration.signal, closeCalled]);
        registered = await registerRank({ agent, banks, ...registration, signal });
      } catch (error) {
        // Stopped by a close (the registry's ABORTED, the close's reason as its cause): refused as publish() is.
        const { aborted, reason } = this.#closeCalled.signal;
        const refused =
          aborted && error instanceof Error && error.cause === reason
            ? new EndpointStateError('register', 'closing', ['created'])
            : error;
        this.#lifecycle.move('created', `registration failed: ${messageOf(refused)}`);
        throw refused;
      }
      this.#registered = registered;
      this.#drain.addRank(registered);
      this.#options.metrics?.banks({ registered: registered.banks.length, retained: 0, quarantined: 0 });
      this.#lifecycle.move(
        'registered',
        `${registered.banks.length} banks registered with ${this.#options.agent.name}`,
      );
      return registered;
    });
  }

  /**
   * `EndpointStateError` unless the endpoint is in one of `allowed` and no close() was called: once one was, the
   * error names `closing` whatever stage the close has reached (it may still be waiting for what is under way
   * before it moves), and `closed` once it ended.
   */
  #requireBeforeClose(operation: string, allowed: readonly EndpointState[]): void {
    const refused = this.#refusalOnceClosing(operation, allowed);
    if (refused !== undefined) throw refused;
    this.#lifecycle.require(operation, allowed);
  }

  /** Runs `act` (a register, publish or drain, from its first move on), marking it as the act a close() waits for. */
  async #act<T>(act: () => Promise<T>): Promise<T> {
    const ended = deferred<void>();
    this.#actUnderWay = ended.promise;
    try {
      return await act();
    } finally {
      this.#actUnderWay = undefined;
      ended.resolve();
    }
  }

  /**
   * Publishes this rank's part under a lease (`startRankPublication`) and follows the worker's readiness:
   * the endpoint is `ready` while every rank of this incarnation is published and every gate passes. One that
   * fails on its own gives back what it published (inventory, readiness watch, rank part, all at once) within
   * `transport.shutdownDeadlineMs` and rejects with its own error; when a part failed or had not settled by
   * then, with `PublicationRollbackError` instead, its own error the `cause`, `rollbackError` naming each. A
   * `close()` stops it at once: it rejects with `EndpointStateError` naming `closing`, and the close withdraws
   * what it published.
   */
  async publish(): Promise<void> {
    this.#requireBeforeClose('publish', ['registered']);
    const registered = this.#registered as RegisteredRank;
    return this.#act(async () => {
      this.#lifecycle.move('publishing', 'publish()');
      try {
        await this.#publication.publish(registered);
      } catch (error) {
        this.#lifecycle.move('registered', `publication failed: ${messageOf(error)}`);
        throw error;
      }
      this.#notifications.start(this.#options.agent);
      this.#lifecycle.move(
        'published',
        `rank part of tp${this.#options.rank.tpRank}/pp${this.#options.rank.ppRank} published at epoch ${this.#publication.epoch}`,
      );
      this.#onReadiness(this.#publication.readiness as WorkerReadiness);
    });
  }

  #onReadiness(readiness: WorkerReadiness): void {
    const state = this.#lifecycle.state;
    // Only this incarnation's readiness counts, and only while published (not before, not once draining).
    const ready = readiness.ready && readiness.incarnation === this.#options.worker.incarnation;
    if (ready && state === 'published')
      this.#lifecycle.move('ready', `worker ${readiness.workerId} is ready at epoch ${readiness.epoch}`);
    else if (!ready && state === 'ready') {
      const why = readiness.ready
        ? `incarnation ${readiness.incarnation} is the ready one`
        : readiness.reasons.map((reason) => reason.message).join('; ');
      this.#lifecycle.move('published', `worker not ready: ${why}`);
    }
  }

  /**
   * Drains this rank, source side first: waits for its pulls and pushes in flight and the pins its own
   * pulls release (`pinsReleased()`), withdraws its part (the worker turns not ready; its readiness watch is
   * closed at the same time, and the step's report names each of the two that failed or had not settled by
   * the step's deadline) and its inventory,
   * waits for readers' pins, stops intake, waits for its own operations (cancelling, then quarantining,
   * those that outlive the deadline), deregisters and hands banks back, all within one `deadlineMs`. Once
   * only. Options that are no object, or a `deadlineMs` that is not a whole number of milliseconds, at
   * least 0, are refused (`EndpointOptionError`) before anything moves.
   */
  async drain(options: { readonly deadlineMs: number }): Promise<EndpointDrainReport> {
    this.#requireBeforeClose('drain', ['registered', 'published', 'ready']);
    const deadlineMs = deadlineOf(options, 'drain');
    return this.#act(async () => {
      this.#lifecycle.move('draining', `drain({ deadlineMs: ${deadlineMs} })`);
      const left = await this.#stopTransfers(deadlineMs);
      const report = await this.#drain.drain({ deadlineMs: left });
      this.#options.metrics?.banks({
        registered: 0,
        retained: report.banksRetained.length,
        quarantined: report.quarantined.length,
      });
      this.#lifecycle.move(
        'drained',
        `${report.banksReturned.length} banks returned, ${report.banksRetained.length} retained, ${report.quarantined.length} operations quarantined`,
      );
      return this.#withPins(report);
    });
  }

  /**
   * Stops following the workers transferred with and closes the templates (released before any
   * deregistration), once the pulls and pushes in flight returned and the pins of the pulls released,
   * or `deadlineMs` passed (a `beforeRelease` hook that never settles holds them no longer; a pull still
   * pinning then posts nothing). Answers what is left of `deadlineMs`.
   */
  async #stopTransfers(deadlineMs: number): Promise<number> {
    const startedAt = this.#clock.now();
    let timer: unknown;
    const deadline = new Promise<void>((resolve) => (timer = this.#clock.setTimer(resolve, deadlineMs)));
    await Promise.race([this.#transfersEnded(), deadline]);
    this.#clock.clearTimer(timer);
    this.#templates.close();
    await this.#workers.close();
    return Math.max(0, deadlineMs - Math.ceil(this.#clock.now() - startedAt));
  }

  async #transfersEnded(): Promise<void> {
    while (this.#transfers.size > 0) await Promise.allSettled([...this.#transfers]);
    await this.#pullSide.released();
  }

  #withPins(report: DrainReport): EndpointDrainReport {
    return { ...report, pins: this.#publication.sourceSide?.waitedPins ?? [] };
  }

  /**
   * Shuts down within `deadlineMs` (`transport.shutdownDeadlineMs` by default): drains first if that was
   * not done, invalidates peers, closes the agent (with what is left), then its pin client (a pull still
   * awaiting a pin ends with `READER_CLOSED`) and last the metrics listener (so the drain can be watched).
   * Its report lists the pins waited for, as `drain()`'s does. Called while a `drain()` is under way, it first
   * waits for that to end (either way; the time counts against `deadlineMs`), then closes from where it ended:
   * nothing is left registered or published. A `register()` under way is stopped before its next bank, rolled
   * back and refused (`EndpointStateError` naming `closing`); the close goes on from `created`. A `publish()`
   * under way, which has no bound of its own, is stopped at once: it rejects with `EndpointStateError` naming
   * `closing`, and the close goes on from `registered`, its drain withdrawing what was published within
   * `deadlineMs` (its report names a withdrawal that did not end in time; a discovery call still answering is
   * withdrawn once it answers). From the call on, `register()`, `publish()`, `drain()`, `pull()`, `push()`
   * and `announceInventory()` are refused with `EndpointStateError` naming `closing`, whatever stage the close
   * has reached, and `closed` once it ended. Idempotent: later calls return the first result.
   * Options that are no object, or a `deadlineMs` that is not a whole number of milliseconds, at least 0, are
   * refused (`EndpointOptionError`) before anything moves.
   */
  close(options: { readonly deadlineMs?: number } = {}): Promise<EndpointShutdownResult> {
    if (this.#shutdown !== undefined) return this.#shutdown;
    this.#lifecycle.require('close', closable);
    let deadlineMs: number;
    try {
      deadlineMs = deadlineOf(options, 'close') ?? this.#options.settings.transport.shutdownDeadlineMs;
    } catch (error) {
      return Promise.reject(error);
    }
    this.#closeCalled.abort();
    const act = this.#actUnderWay;
    // Without an act under way the close begins now: its deadline counts from this call.
    const closing = act === undefined ? this.#close(deadlineMs) : this.#afterAct(act, deadlineMs);
    this.#shutdown = closing
      .then((result) => ({ ...result, report: this.#withPins(result.report) }))
      .finally(() => {
        // A pull the close went on without ends now, not at its pin timeout; no renewal timer is left.
        this.#pinClient.close();
        return this.#metricsListener?.close();
      });
    return this.#shutdown;
  }

  /** Closes once `act` (the one under way) has ended, with what is left of `deadlineMs`. */
  async #afterAct(act: Promise<void>, deadlineMs: number): Promise<ShutdownResult> {
    const startedAt = this.#clock.now();
    await act;
    return this.#close(Math.max(0, deadlineMs - Math.ceil(this.#clock.now() - startedAt)));
  }

  async #close(deadlineMs: number): Promise<ShutdownResult> {
    const options = { deadlineMs: await this.#stopTransfers(deadlineMs) };
    const state = this.#lifecycle.state;
    if (state === 'registered' || state === 'published' || state === 'ready')
      this.#lifecycle.move('draining', 'close() before drain()');
    if (this.#lifecycle.state === 'draining') {
      const result = await this.#drain.shutdown(options);
      this.#lifecycle.move(
        'drained',
        `${result.report.banksReturned.length} banks returned, ${result.banksRetained.length} retained`,
      );
      this.#lifecycle.move('closing', 'close()');
      this.#lifecycle.move('closed', result.agentDestroyed ? 'agent closed' : 'agent kept for quarantined operations');
      return result;
    }
    this.#lifecycle.move('closing', 'close()');
    // Never registered (or its registration rolled back): the banks it was given go back to their owners.
    const handedBack = state === 'created' ? await releaseBanks(this.#options.banks) : undefined;
    const result = await this.#drain.shutdown(options);
    this.#lifecycle.move('closed', result.agentDestroyed ? 'agent closed' : 'agent kept for quarantined operations');
    if (handedBack === undefined) return result;
    const notReturned = [...handedBack.retained, ...handedBack.unreturned];
    return {
      ...result,
      report: {
        ...result.report,
        banksReturned: [...handedBack.returned, ...result.report.banksReturned],
        banksRetained: [...notReturned, ...result.report.banksRetained],
      },
      banksRetained: [...notReturned, ...result.banksRetained],
      retained: result.retained || notReturned.length > 0,
    };
  }
}

/** Every state but those of a close under way or done (whose `close()` answers the first close's result). */
const closable = endpointStates.filter((state) => state !== 'closing' && state !== 'closed');
