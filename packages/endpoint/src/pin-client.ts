// A reader's side of the pin protocol: asks each source rank for a pin, renews it while held, hears
// when the source takes it back or stops answering, and releases it once its reads are quiescent.
import type { RankId } from '@kvreuse/descriptors';
import { type Clock, systemClock } from '@kvreuse/drain';
import type { Agent, Notification, Peer, PeerEvent } from '@kvreuse/native-bindings';
import { type Deferred, deferred } from './deferred.js';
import { describeRank, EndpointOptionError, PinRefusedError, PinTimeoutError } from './errors.js';
import { encodePinMessage, type PinGrantMessage, type PinMessage, safeParsePinMessage } from './pin-messages.js';
import type { HeldPin, PinLoss, PinLossReason } from './pins.js';

export interface PinClientOptions {
  readonly agent: Pick<Agent, 'sendNotification'>;
  readonly reader: { readonly workerId: string; readonly incarnation: string; readonly rank: RankId };
  /** How long a pin request and a release wait for the source's answer. */
  readonly answerTimeoutMs: number;
  readonly clock?: Clock;
}

export interface PinRequest {
  /** The source rank's peer (its agent, loaded from its published metadata). */
  readonly peer: Peer;
  readonly source: HeldPin['source'];
  readonly start: number;
  readonly hashes: BigUint64Array;
  readonly wantsChecksums: boolean;
}

interface Waiter {
  readonly answers: ReadonlySet<PinMessage['kind']>;
  readonly settle: (message: PinMessage | undefined) => void;
}

const clientKinds = new Set<PinMessage['kind']>(['grant', 'refuse', 'renewed', 'released', 'revoke']);
const pinAnswers = new Set<PinMessage['kind']>(['grant', 'refuse']);
const releaseAnswers = new Set<PinMessage['kind']>(['released']);

class ClientPin implements HeldPin {
  readonly pinId: string;
  readonly source: HeldPin['source'];
  readonly positions: { readonly start: number; readonly count: number };
  readonly sourceBlocks: Uint32Array;
  readonly checksums?: Uint32Array;
  readonly lost: Promise<PinLoss>;
  readonly peer: Peer;
  readonly leaseMs: number;
  readonly #loss: Deferred<PinLoss>;
  readonly #client: PinClient;
  lastConfirmedAt: number;
  renewTimer: unknown;
  ended = false;

  constructor(client: PinClient, request: PinRequest, grant: PinGrantMessage, now: number) {
    this.#client = client;
    this.pinId = grant.pinId;
    this.source = request.source;
    this.peer = request.peer;
    this.positions = { start: request.start, count: grant.sourceBlocks.length };
    this.sourceBlocks = grant.sourceBlocks;
    if (grant.checksums !== undefined) this.checksums = grant.checksums;
    this.leaseMs = grant.leaseMs;
    this.lastConfirmedAt = now;
    this.#loss = deferred<PinLoss>();
    this.lost = this.#loss.promise;
  }

  lose(reason: PinLossReason, why: string): void {
    if (this.ended) return;
    this.#loss.resolve({ reason, detail: `pin ${this.pinId} on source rank ${describeRank(this.source.rank)} of ${this.source.workerId}: ${why}` });
    this.#client.forget(this);
  }

  release(): Promise<void> {
    return this.#client.release(this);
  }
}

export class PinClient {
  readonly #options: PinClientOptions;
  readonly #clock: Clock;
  readonly #waiters = new Map<string, Waiter>();
  readonly #pins = new Map<string, ClientPin>();
  /** Pins whose request timed out, by pin id: a grant arriving late is given straight back. */
  readonly #abandoned = new Map<string, Peer>();
  #sequence = 0;
  #malformed = 0;

  constructor(options: PinClientOptions) {
    if (!Number.isSafeInteger(options.answerTimeoutMs) || options.answerTimeoutMs < 1) {
      throw new EndpointOptionError('answerTimeoutMs', options.answerTimeoutMs, 'a whole number of milliseconds ≥ 1');
    }
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
  }

  /** Messages that were not pin messages of this version (ignored). */
  get malformedMessages(): number {
    return this.#malformed;
  }

  /** Pins held now. */
  get heldPins(): number {
    return this.#pins.size;
  }

  /**
   * Pins the longest prefix of `request.hashes` the source rank holds. Rejects with PinRefusedError
   * (nothing held), PinTimeoutError (no answer in time), PinTooLargeError (too many blocks for one message).
   */
  async pin(request: PinRequest): Promise<HeldPin> {
    const pinId = `pin-${++this.#sequence}`;
    const { reader } = this.#options;
    const message: PinMessage = { kind: 'request', pinId, reader, source: { incarnation: request.source.incarnation, epoch: request.source.epoch }, start: request.start, hashes: request.hashes, wantsChecksums: request.wantsChecksums };
    const answer = await this.#exchange(request.peer, message, pinAnswers);
    if (answer === undefined) {
      this.#abandoned.set(pinId, request.peer);
      throw new PinTimeoutError('pin', request.source.rank, this.#options.answerTimeoutMs);
    }
    if (answer.kind !== 'grant') throw new PinRefusedError(request.source.rank, answer.kind === 'refuse' ? answer.reason : answer.kind);
    const pin = new ClientPin(this, request, answer, this.#clock.now());
    this.#pins.set(pinId, pin);
    request.peer.watch();
    this.#scheduleRenewal(pin);
    return pin;
  }

  /** Handles one notification; false when it is not for a reader (a source's message, or malformed: counted and ignored). */
  receive(notification: Notification): boolean {
    const parsed = safeParsePinMessage(notification.data);
    if (!parsed.success) {
      this.#malformed++;
      return false;
    }
    const message = parsed.data;
    if (!clientKinds.has(message.kind)) return false;
    const waiter = this.#waiters.get(message.pinId);
    if (waiter?.answers.has(message.kind) === true) {
      waiter.settle(message);
      return true;
    }
    const abandoned = this.#abandoned.get(message.pinId);
    if (abandoned !== undefined) {
      this.#abandoned.delete(message.pinId);
      if (message.kind === 'grant') this.#options.agent.sendNotification(abandoned, encodePinMessage({ kind: 'release', pinId: message.pinId }));
      return true;
    }
    const pin = this.#pins.get(message.pinId);
    if (pin === undefined) return true;
    if (message.kind === 'renewed') pin.lastConfirmedAt = this.#clock.now();
    else if (message.kind === 'revoke') pin.lose(message.reason, `revoked by the source (${message.reason})`);
    else if (message.kind === 'refuse') pin.lose(message.reason === 'evicted' ? 'evicted' : 'lease-lapsed', `the source refused its renewal (${message.reason})`);
    return true;
  }

  /** A heartbeat report: every pin on a source that stopped answering is lost. */
  peerEvent(event: PeerEvent): void {
    if (event.type !== 'peer-unresponsive') return;
    for (const pin of [...this.#pins.values()]) {
      if (pin.peer === event.peer) pin.lose('source-unresponsive', `its agent ${event.peerName} answered nothing for ${Math.round(event.silentMs)} ms`);
    }
  }

  /** @internal Gives `pin` back, waiting for the source's acknowledgement. */
  async release(pin: ClientPin): Promise<void> {
    if (pin.ended) return;
    this.forget(pin);
    const answer = await this.#exchange(pin.peer, { kind: 'release', pinId: pin.pinId }, releaseAnswers);
    if (answer === undefined) throw new PinTimeoutError('release', pin.source.rank, this.#options.answerTimeoutMs);
  }

  /** @internal Stops renewing and watching for `pin`. */
  forget(pin: ClientPin): void {
    if (pin.ended) return;
    pin.ended = true;
    this.#clock.clearTimer(pin.renewTimer);
    this.#pins.delete(pin.pinId);
    if (![...this.#pins.values()].some((other) => other.peer === pin.peer)) pin.peer.unwatch();
  }

  /** Sends `message` and waits for the source's answer to its pin id; undefined when none came in time. */
  #exchange(peer: Peer, message: PinMessage, answers: ReadonlySet<PinMessage['kind']>): Promise<PinMessage | undefined> {
    const answered = deferred<PinMessage | undefined>();
    const timer = this.#clock.setTimer(() => waiter.settle(undefined), this.#options.answerTimeoutMs);
    const waiter: Waiter = {
      answers,
      settle: (answer) => {
        this.#waiters.delete(message.pinId);
        this.#clock.clearTimer(timer);
        answered.resolve(answer);
      },
    };
    this.#waiters.set(message.pinId, waiter);
    try {
      this.#options.agent.sendNotification(peer, encodePinMessage(message));
    } catch (error) {
      waiter.settle(undefined);
      throw error;
    }
    return answered.promise;
  }

  #scheduleRenewal(pin: ClientPin): void {
    pin.renewTimer = this.#clock.setTimer(() => {
      if (pin.ended) return;
      if (this.#clock.now() - pin.lastConfirmedAt >= pin.leaseMs) {
        pin.lose('lease-lapsed', `no renewal was confirmed within its ${pin.leaseMs} ms lease`);
        return;
      }
      try {
        this.#options.agent.sendNotification(pin.peer, encodePinMessage({ kind: 'renew', pinId: pin.pinId }));
      } catch {
        pin.lose('source-disconnected', 'its renewal could not be sent');
        return;
      }
      this.#scheduleRenewal(pin);
    }, Math.max(1, Math.floor(pin.leaseMs / 3)));
  }
}
