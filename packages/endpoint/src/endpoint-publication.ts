// What one rank publishes in discovery while it is published: its rank part under a lease, the watch on its
// worker's readiness and, for a serving rank, its source side (pin server and inventory). Published in one
// go, stopped at once by a close, withdrawn by the drain.
import type { Clock } from '@kvreuse/drain';
import {
  type RankPublication,
  startRankPublication,
  watchWorkerReadiness,
  type WorkerReadiness,
  type WorkerReadinessWatch,
} from '@kvreuse/discovery';
import { messageOf } from '@kvreuse/errors';
import { buildRankPart, type RegisteredRank, transportMetadataOf } from '@kvreuse/registry';
import { unlessAborted } from './abortable.js';
import type { RankBankBytes } from './block-checksum.js';
import type { ReuseEndpointOptions } from './endpoint-options.js';
import { EndpointError } from './errors.js';
import { EndpointStateError } from './lifecycle.js';
import type { NotificationRouter } from './notification-router.js';
import type { PeerTemplates } from './peer-templates.js';
import type { PinChannel } from './pin-auth.js';
import type { RemotePeers } from './remote-peers.js';
import { type ServeOptions, SourceSide } from './source-side.js';
import { thisHost } from './this-host.js';
import { notWithdrawn, type WithdrawalStep } from './withdrawal-steps.js';

export interface EndpointPublicationOptions {
  readonly options: ReuseEndpointOptions;
  /** Aborted by the endpoint's first close(): a publication under way stops at once. */
  readonly closeCalled: AbortSignal;
  readonly pinChannel: PinChannel;
  readonly notifications: NotificationRouter;
  readonly templates: PeerTemplates;
  readonly remotePeers: RemotePeers;
  readonly clock: Clock;
  /** Told each readiness the watch sees. */
  readonly onReadiness: (readiness: WorkerReadiness) => void;
}

/**
 * A publication that failed on its own (`cause`, its own error) and could not give back all it had published
 * within `transport.shutdownDeadlineMs`: `rollbackError` names each part that failed or had not settled by then.
 */
export class PublicationRollbackError extends EndpointError {
  readonly code = 'PUBLICATION_NOT_ROLLED_BACK';
  constructor(
    cause: unknown,
    readonly rollbackError: AggregateError,
  ) {
    super(`the publication failed (${messageOf(cause)}) and was not all given back: ${rollbackError.message}`, {
      cause,
    });
  }
}

export class EndpointPublication {
  readonly #deps: EndpointPublicationOptions;
  #publication: RankPublication | undefined;
  #readiness: WorkerReadinessWatch | undefined;
  #sourceSide: SourceSide | undefined;
  #stopServing: (() => void) | undefined;

  constructor(deps: EndpointPublicationOptions) {
    this.#deps = deps;
  }

  /** The epoch discovery handed this incarnation, once published. */
  get epoch(): number | undefined {
    return this.#publication?.epoch;
  }

  /** The worker's readiness as last seen, once published. */
  get readiness(): WorkerReadiness | undefined {
    return this.#readiness?.current;
  }

  /** A serving rank's source side, once its publication began serving. */
  get sourceSide(): SourceSide | undefined {
    return this.#sourceSide;
  }

  /**
   * Publishes the rank part of `registered` under a lease, watches the worker's readiness and, for a serving
   * rank, serves. A failure on its own gives back what was published, within `transport.shutdownDeadlineMs`,
   * and rejects with its own error, or with `PublicationRollbackError` (its error the cause) when some part
   * failed or had not settled by then; one that a close stopped
   * (`EndpointStateError` naming `closing`) leaves it for the close's drain.
   */
  async publish(registered: RegisteredRank): Promise<void> {
    const { options, closeCalled, onReadiness } = this.#deps;
    const { discovery, secret, worker, agent, settings, keyPrefix } = options;
    try {
      const host = options.host === undefined ? thisHost() : (options.host ?? undefined);
      const part = buildRankPart(
        worker,
        registered,
        transportMetadataOf(agent, secret, { ...worker, ...registered }),
        host === undefined ? {} : { host },
      );
      const prefix = keyPrefix === undefined ? {} : { keyPrefix };
      const publication = await this.#unlessClosing(
        () => startRankPublication(discovery, [part], { leaseTtlMs: settings.discovery.leaseTtlMs, ...prefix }),
        (late) => late.withdraw(),
      );
      this.#publication = publication;
      this.#readiness = await this.#unlessClosing(
        () =>
          watchWorkerReadiness(discovery, worker.workerId, {
            onChange: onReadiness,
            ...(options.gates === undefined ? {} : { gates: options.gates }),
            ...(options.admissionGate === undefined ? {} : { admissionGate: options.admissionGate }),
            ...prefix,
          }),
        (late) => late.close(),
      );
      const { serve } = options;
      if (serve !== undefined)
        await this.#unlessClosing(
          () => this.#serve(serve, publication, registered),
          (late) => late.withdrawInventory(),
        );
    } catch (error) {
      this.#stopServing?.();
      // Stopped by a close: the close's drain withdraws what was published, within the close's deadline,
      // and its report names what it could not withdraw.
      if (closeCalled.aborted) throw error;
      const rollbackError = await this.#withdrawAfterFailure();
      if (rollbackError !== undefined) throw new PublicationRollbackError(error, rollbackError);
      throw error;
    }
  }

  /**
   * The drain's rank-part step: closes the readiness watch and withdraws the rank part, both begun at once so
   * that one that hangs holds the other back no longer than the drain's deadline for the step (`until`
   * aborts then). Rejects naming each that failed once both ended, or each that failed or had not settled
   * when `until` aborted.
   */
  async withdraw(until: AbortSignal): Promise<void> {
    const failed = await notWithdrawn(this.#rankPartSteps(), until);
    if (failed !== undefined) throw failed;
  }

  #rankPartSteps(): WithdrawalStep[] {
    return [
      { failure: 'the readiness watch did not close', ended: this.#readiness?.close() },
      { failure: 'the rank part was not withdrawn', ended: this.#publication?.withdraw() },
    ];
  }

  /**
   * Gives back what a publication that failed on its own had published: its inventory, readiness watch and
   * rank part, all begun at once and waited for until `transport.shutdownDeadlineMs` (the close's deadline)
   * passes. Resolves with an `AggregateError` naming each that failed or had not settled by then, if any.
   *
   * All of the deadline, where a drain gives its withdrawals a quarter of its own: the drain shares its
   * deadline with the readers' wait and the worker's operations, which a hanging discovery must not starve,
   * while a publication that failed served no operation and has nothing else to spend the time on. A shorter
   * share would only report parts as not given back that a slow discovery would still have withdrawn.
   */
  async #withdrawAfterFailure(): Promise<AggregateError | undefined> {
    const { clock, options } = this.#deps;
    const deadline = new AbortController();
    const timer = clock.setTimer(
      () => deadline.abort(new Error('the deadline passed first')),
      options.settings.transport.shutdownDeadlineMs,
    );
    const steps = [
      { failure: 'the inventory was not withdrawn', ended: this.#sourceSide?.withdrawInventory() },
      ...this.#rankPartSteps(),
    ];
    this.#sourceSide = undefined;
    this.#readiness = undefined;
    this.#publication = undefined;
    try {
      return await notWithdrawn(steps, deadline.signal);
    } finally {
      clock.clearTimer(timer);
    }
  }

  /**
   * One step of a publication: `start()`'s outcome, unless close() is called before it settles. Then the
   * publication is refused at once (`EndpointStateError` naming `closing`; the close withdraws what it
   * published), and what the step holds once it settles is given back (`giveBack`).
   */
  async #unlessClosing<T>(start: () => Promise<T>, giveBack: (late: T) => Promise<unknown>): Promise<T> {
    const { closeCalled } = this.#deps;
    const refused = (): EndpointStateError => new EndpointStateError('publish', 'closing', ['registered']);
    if (closeCalled.aborted) throw refused();
    const step = start();
    try {
      return await unlessAborted(step, closeCalled);
    } catch (error) {
      if (error !== closeCalled.reason) throw error;
      void step.then(giveBack).catch(() => undefined);
      throw refused();
    }
  }

  /**
   * Starts answering pin requests and publishes the retained inventory (a failed publication leaves nothing
   * served); resolves with the source side once its inventory is published.
   */
  async #serve(serve: ServeOptions, publication: RankPublication, registered: RegisteredRank): Promise<SourceSide> {
    const { options, pinChannel, notifications, templates, remotePeers, clock } = this.#deps;
    const { agent, discovery, secret, keyPrefix, worker, rank, settings, metrics } = options;
    const source = new SourceSide({
      agent,
      channel: pinChannel,
      discovery,
      secret,
      serve,
      source: { workerId: worker.workerId, incarnation: worker.incarnation, epoch: publication.epoch, rank },
      bankBytes: options.bankBytes as RankBankBytes,
      banks: registered.banks,
      leaseMs: serve.leaseMs ?? settings.discovery.leaseTtlMs,
      lease: publication.lease.id,
      clock,
      templates,
      remotePeers,
      ...(keyPrefix === undefined ? {} : { keyPrefix }),
      ...(metrics === undefined ? {} : { onHeldChange: (held: number) => metrics.pinsHeld('serve', held) }),
    });
    this.#sourceSide = source;
    this.#stopServing = notifications.addHandler((notification) => source.server.receive(notification));
    await source.publishInventory();
    return source;
  }
}
