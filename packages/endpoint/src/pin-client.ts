// A reader's side of the pin protocol: asks each source rank for a pin, renews it while held, hears
// when the source takes it back or stops answering, and releases it once its reads are quiescent. The
// source's peer is watched by the heartbeat while a request awaits its answer or a pin is held there.
// Every message is authenticated (pin-auth.ts); request ids are random, and a pin's renewals and
// release carry a rising sequence number.
import { randomBytes } from 'node:crypto';
import type { RankId } from '@kvreuse/descriptors';
import { type Clock, systemClock } from '@kvreuse/drain';
import type { Notification, Peer, PeerEvent } from '@kvreuse/native-bindings';
import { checkFunction, checkMethods, checkObject } from './argument-shapes.js';
import { type Deferred, deferred } from './deferred.js';
import {
  describeRank,
  describeUnresponsive,
  EndpointOptionError,
  PinRefusedError,
  PinTimeoutError,
  ReaderClosedError,
  SourceUnresponsiveError,
} from './errors.js';
import { tellEach } from './listeners.js';
import { PinChannel } from './pin-auth.js';
import { looksLikePinMessage, type PinGrantMessage, type PinMessage, type PinRefusalReason } from './pin-messages.js';
import type { HeldPin, PinLoss, PinLossReason } from './pins.js';

export interface PinClientOptions {
  /** This agent's pin messages, authenticated (the one channel of the agent: refusals are counted there). */
  readonly channel: PinChannel;
  readonly reader: { readonly workerId: string; readonly incarnation: string; readonly rank: RankId };
  /** How long a pin request and a release wait for the source's answer. */
  readonly answerTimeoutMs: number;
  readonly clock?: Clock;
  /**
   * Told the number of pins held whenever it changes: a grant, a release, or a pin lost (revoked, refused renewal,
   * lapsed, source unresponsive). One that throws is reported as a process warning; the pins are kept as if it had not.
   */
  readonly onHeldChange?: (held: number) => void;
}

export interface PinRequest {
  /** The source rank's peer (its agent, loaded from its published metadata). */
  readonly peer: Peer;
  readonly source: HeldPin['source'];
  readonly start: number;
  readonly hashes: BigUint64Array;
  readonly wantsChecksums: boolean;
}

/** How an exchange with a source ended: its answer, no answer in time, the heartbeat's report that it stopped answering, or this client closed. */
type Outcome =
  | { readonly answer: PinMessage }
  | { readonly timedOut: true }
  | { readonly unresponsive: PeerEvent }
  | { readonly closed: true };

interface AbandonedRequest {
  readonly peer: Peer;
  readonly forgetAt: number;
}

interface Waiter {
  readonly peer: Peer;
  readonly answers: ReadonlySet<PinMessage['kind']>;
  readonly settle: (outcome: Outcome) => void;
}

const clientKinds = new Set<PinMessage['kind']>(['grant', 'refuse', 'renewed', 'released', 'revoke']);
const pinAnswers = new Set<PinMessage['kind']>(['grant', 'refuse']);
const releaseAnswers = new Set<PinMessage['kind']>(['released']);

class ClientPin implements HeldPin {
  /** The grant id the source drew. */
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
  /**
   * When the lease the source last confirmed began, at the latest: when the request or renewal it answered was
   * sent (the source counts the lease from when it took the message, never earlier).
   */
  lastConfirmedAt: number;
  /** When each renewal not yet answered was sent, oldest first (the source answers them in order). */
  readonly renewalsSentAt: number[] = [];
  renewTimer: unknown;
  /** The last renewal's or release's sequence number. */
  sequence = 0;
  ended = false;

  constructor(client: PinClient, request: PinRequest, grant: PinGrantMessage, askedAt: number) {
    this.#client = client;
    this.pinId = grant.grantId;
    this.source = request.source;
    this.peer = request.peer;
    this.positions = { start: request.start, count: grant.sourceBlocks.length };
    this.sourceBlocks = grant.sourceBlocks;
    if (grant.checksums !== undefined) this.checksums = grant.checksums;
    this.leaseMs = grant.leaseMs;
    this.lastConfirmedAt = askedAt;
    this.#loss = deferred<PinLoss>();
    this.lost = this.#loss.promise;
  }

  lose(reason: PinLossReason, why: string): void {
    if (this.ended) return;
    this.#loss.resolve({
      reason,
      detail: `pin ${this.pinId} on source rank ${describeRank(this.source.rank)} of ${this.source.workerId}: ${why}`,
    });
    this.#client.forget(this);
  }

  release(): Promise<void> {
    return this.#client.release(this);
  }
}

export class PinClient {
  readonly #options: PinClientOptions;
  readonly #clock: Clock;
  readonly #channel: PinChannel;
  /** Exchanges awaiting their answer, by request id (a pin request) or grant id (a release). */
  readonly #waiters = new Map<string, Waiter>();
  readonly #pins = new Map<string, ClientPin>();
  /**
   * Requests that timed out or whose source stopped answering, by request id, oldest first: a grant arriving
   * within an answer timeout of that is given straight back; a later one is ignored, and lapses at the source
   * since nothing renews it.
   */
  readonly #abandoned = new Map<string, AbandonedRequest>();
  /**
   * Peers the heartbeat reported unresponsive and not responsive since: a pin asked of them fails at once. Weak, so
   * that the peers of restarted sources that never answered again leave with their unloaded handles.
   */
  readonly #unresponsive = new WeakMap<Peer, PeerEvent>();
  #malformed = 0;
  #closed = false;

  /** Refuses options of another shape (`EndpointOptionError` naming the option). */
  constructor(options: PinClientOptions) {
    checkObject('options', options, 'PinClient options: { channel, reader, answerTimeoutMs, clock?, onHeldChange? }');
    if (!(options.channel instanceof PinChannel))
      throw new EndpointOptionError('channel', options.channel, "this agent's PinChannel");
    checkObject('reader', options.reader, 'this rank as its sources name it: { workerId, incarnation, rank }');
    checkFunction('onHeldChange', options.onHeldChange, true);
    if (!Number.isSafeInteger(options.answerTimeoutMs) || options.answerTimeoutMs < 1) {
      throw new EndpointOptionError('answerTimeoutMs', options.answerTimeoutMs, 'a whole number of milliseconds ≥ 1');
    }
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#channel = options.channel;
  }

  /** Notifications that were not pin messages (ignored). */
  get malformedMessages(): number {
    return this.#malformed;
  }

  /** Pins held now. */
  get heldPins(): number {
    return this.#pins.size;
  }

  /**
   * Pins the longest prefix of `request.hashes` the source rank holds. Rejects with PinRefusedError
   * (nothing held), SourceUnresponsiveError (the heartbeat found the source's agent unresponsive before it
   * answered, or had found it so already), PinTimeoutError (no answer in time), PinTooLargeError (too many
   * blocks for one message), ReaderClosedError (the client closed before the answer), EndpointOptionError (a
   * request of another shape, naming what is wrong; nothing sent).
   */
  async pin(request: PinRequest): Promise<HeldPin> {
    checkPinRequest(request);
    if (this.#closed) throw new ReaderClosedError('pin', request.source.rank);
    const silent = this.#unresponsive.get(request.peer);
    if (silent !== undefined) {
      // Still watched, so that its recovery is heard (`peer-responsive`).
      request.peer.watch();
      throw unresponsiveError('pin', request.source.rank, silent);
    }
    const pinId = randomBytes(12).toString('hex');
    const { reader } = this.#options;
    const message: PinMessage = {
      kind: 'request',
      pinId,
      reader,
      source: { incarnation: request.source.incarnation, epoch: request.source.epoch },
      start: request.start,
      hashes: request.hashes,
      wantsChecksums: request.wantsChecksums,
    };
    const askedAt = this.#clock.now();
    const outcome = await this.#exchange(request.peer, message, pinAnswers);
    if ('closed' in outcome) throw new ReaderClosedError('pin', request.source.rank);
    if (!('answer' in outcome)) {
      this.#abandon(pinId, request.peer);
      this.#unwatchIfUnused(request.peer);
      if ('unresponsive' in outcome) throw unresponsiveError('pin', request.source.rank, outcome.unresponsive);
      throw new PinTimeoutError('pin', request.source.rank, this.#options.answerTimeoutMs);
    }
    const { answer } = outcome;
    if (answer.kind !== 'grant') {
      this.#unwatchIfUnused(request.peer);
      throw new PinRefusedError(request.source.rank, answer.kind === 'refuse' ? answer.reason : answer.kind);
    }
    const pin = new ClientPin(this, request, answer, askedAt);
    this.#pins.set(pin.pinId, pin);
    this.#tellHeld();
    this.#scheduleRenewal(pin);
    return pin;
  }

  /**
   * Handles one notification; false when it is not for a reader (a source's message, or no pin message:
   * counted and ignored). A pin message that fails its authentication, or that is about a pin and comes from another agent than its source, is refused (counted, ignored).
   */
  receive(notification: Notification): boolean {
    if (!looksLikePinMessage(notification.data)) {
      this.#malformed++;
      return false;
    }
    const message = this.#channel.open(notification);
    if (message === undefined) return true;
    if (!clientKinds.has(message.kind)) return false;
    const { sender } = notification;
    const waiter = this.#waiters.get(message.pinId);
    if (waiter?.answers.has(message.kind) === true) {
      if (waiter.peer.name !== sender) return this.#refuseNotSource();
      waiter.settle({ answer: message });
      return true;
    }
    this.#forgetAbandonedBy(this.#clock.now());
    const abandoned = this.#abandoned.get(message.pinId);
    if (abandoned !== undefined) {
      if (abandoned.peer.name !== sender) return this.#refuseNotSource();
      this.#abandoned.delete(message.pinId);
      if (message.kind === 'grant')
        this.#channel.send(abandoned.peer, { kind: 'release', pinId: message.grantId, sequence: 1 });
      return true;
    }
    const pin = this.#pins.get(message.pinId);
    if (pin === undefined) return true;
    if (pin.peer.name !== sender) return this.#refuseNotSource();
    if (message.kind === 'renewed') pin.lastConfirmedAt = pin.renewalsSentAt.shift() ?? pin.lastConfirmedAt;
    else if (message.kind === 'revoke') pin.lose(message.reason, `revoked by the source (${message.reason})`);
    else if (message.kind === 'refuse')
      pin.lose(renewalRefusalLoss(message.reason), `the source refused its renewal (${message.reason})`);
    return true;
  }

  #abandon(pinId: string, peer: Peer): void {
    const now = this.#clock.now();
    this.#forgetAbandonedBy(now);
    this.#abandoned.set(pinId, { peer, forgetAt: now + this.#options.answerTimeoutMs });
  }

  /** Forgets the abandoned requests whose late grant is no longer awaited at `now`. */
  #forgetAbandonedBy(now: number): void {
    // Oldest first, all kept for the same time: the first one still awaited ends the pruning.
    for (const [pinId, { forgetAt }] of this.#abandoned) {
      if (forgetAt > now) break;
      this.#abandoned.delete(pinId);
    }
  }

  /** Counts a message about a pin that did not come from the pin's source; always true (it was for a reader). */
  #refuseNotSource(): true {
    this.#channel.refuse('not-source');
    return true;
  }

  /**
   * A heartbeat report. On a source that stopped answering every pin is lost and every request awaiting
   * its answer ends at once; later pins asked of it fail at once until it answers again.
   */
  peerEvent(event: PeerEvent): void {
    if (event.type === 'peer-responsive') {
      if (this.#unresponsive.delete(event.peer)) this.#unwatchIfUnused(event.peer);
      return;
    }
    this.#unresponsive.set(event.peer, event);
    for (const waiter of [...this.#waiters.values()]) {
      if (waiter.peer === event.peer) waiter.settle({ unresponsive: event });
    }
    for (const pin of [...this.#pins.values()]) {
      if (pin.peer === event.peer)
        pin.lose(
          'source-unresponsive',
          `its agent ${event.peerName} ${describeUnresponsive(event.cause, event.silentMs)}`,
        );
    }
  }

  /**
   * Ends the client with its endpoint: every request and release awaiting its answer ends at once with
   * `ReaderClosedError`, as does every later pin; held pins are no longer renewed (their sources' leases
   * lapse them) and no timer is left armed. Idempotent.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const waiter of [...this.#waiters.values()]) waiter.settle({ closed: true });
    for (const pin of [...this.#pins.values()]) this.forget(pin);
    this.#abandoned.clear();
  }

  /** @internal Gives `pin` back, waiting for the source's acknowledgement. */
  async release(pin: ClientPin): Promise<void> {
    if (pin.ended) return;
    this.forget(pin);
    const release = { kind: 'release' as const, pinId: pin.pinId, sequence: ++pin.sequence };
    const outcome = await this.#exchange(pin.peer, release, releaseAnswers);
    this.#unwatchIfUnused(pin.peer);
    if ('closed' in outcome) throw new ReaderClosedError('release', pin.source.rank);
    if ('unresponsive' in outcome) throw unresponsiveError('release', pin.source.rank, outcome.unresponsive);
    if ('timedOut' in outcome) throw new PinTimeoutError('release', pin.source.rank, this.#options.answerTimeoutMs);
  }

  /** @internal Stops renewing and watching for `pin`. */
  forget(pin: ClientPin): void {
    if (pin.ended) return;
    pin.ended = true;
    this.#clock.clearTimer(pin.renewTimer);
    this.#pins.delete(pin.pinId);
    this.#tellHeld();
    this.#unwatchIfUnused(pin.peer);
  }

  /** Tells `onHeldChange` the pins held now; a throw of it is reported as a warning and changes nothing here. */
  #tellHeld(): void {
    const { onHeldChange } = this.#options;
    if (onHeldChange !== undefined) tellEach([onHeldChange], this.#pins.size, 'a pins-held listener');
  }

  /** Stops the heartbeat watching `peer` once no pin is held there, no request awaits its answer and it is not known unresponsive. */
  #unwatchIfUnused(peer: Peer): void {
    if (!peer.isOpen) {
      this.#unresponsive.delete(peer);
      return;
    }
    if (this.#unresponsive.has(peer)) return;
    if (
      [...this.#pins.values()].some((pin) => pin.peer === peer) ||
      [...this.#waiters.values()].some((waiter) => waiter.peer === peer)
    )
      return;
    peer.unwatch();
  }

  /**
   * Sends `message` and waits, with `peer` watched by the heartbeat, for the source's answer to its pin
   * id, the end of the answer timeout, or the heartbeat's report that the source stopped answering.
   */
  #exchange(peer: Peer, message: PinMessage, answers: ReadonlySet<PinMessage['kind']>): Promise<Outcome> {
    const answered = deferred<Outcome>();
    const timer = this.#clock.setTimer(() => this.#timeOut(waiter), this.#options.answerTimeoutMs);
    const waiter: Waiter = {
      peer,
      answers,
      settle: (outcome) => {
        if (this.#waiters.get(message.pinId) !== waiter) return; // settled already
        this.#waiters.delete(message.pinId);
        this.#clock.clearTimer(timer);
        answered.resolve(outcome);
      },
    };
    this.#waiters.set(message.pinId, waiter);
    try {
      peer.watch();
      this.#channel.send(peer, message);
    } catch (error) {
      waiter.settle({ timedOut: true });
      this.#unwatchIfUnused(peer);
      throw error;
    }
    return answered.promise;
  }

  /**
   * At the answer timeout: the answer may have arrived in time while the JavaScript thread was held (a long
   * synchronous call, a loaded machine), its notification not yet read. What the agent received is delivered first,
   * and the request times out only if its answer was not among it (once its handling ran).
   */
  #timeOut(waiter: Waiter): void {
    this.#channel.deliverPending();
    setImmediate(() => waiter.settle({ timedOut: true }));
  }

  /**
   * Renews `pin` a third of its lease from now. At that time a confirmation may have arrived while the JavaScript
   * thread was held, its notification not yet read: what the agent received is delivered first, and the lease is
   * judged once its handling ran.
   */
  #scheduleRenewal(pin: ClientPin): void {
    pin.renewTimer = this.#clock.setTimer(
      () => {
        this.#channel.deliverPending();
        setImmediate(() => this.#renewOrLapse(pin));
      },
      Math.max(1, Math.floor(pin.leaseMs / 3)),
    );
  }

  #renewOrLapse(pin: ClientPin): void {
    if (pin.ended) return;
    const now = this.#clock.now();
    if (now - pin.lastConfirmedAt >= pin.leaseMs) {
      pin.lose('lease-lapsed', `no renewal was confirmed within its ${pin.leaseMs} ms lease`);
      return;
    }
    try {
      this.#channel.send(pin.peer, { kind: 'renew', pinId: pin.pinId, sequence: ++pin.sequence });
    } catch {
      pin.lose('source-disconnected', 'its renewal could not be sent');
      return;
    }
    pin.renewalsSentAt.push(now);
    this.#scheduleRenewal(pin);
  }
}

function unresponsiveError(operation: 'pin' | 'release', rank: RankId, event: PeerEvent): SourceUnresponsiveError {
  return new SourceUnresponsiveError(operation, rank, event.peerName, event.silentMs, event.cause);
}

/** What a refused renewal means for the pin: its blocks are gone, or the engine that held them is, or its lease lapsed. */
function renewalRefusalLoss(reason: PinRefusalReason): PinLossReason {
  return reason === 'evicted' || reason === 'engine-gone' ? reason : 'lease-lapsed';
}

/** Refuses a pin request of another shape; what the pin message's encoding checks (numbers, names) is left to it. */
function checkPinRequest(request: PinRequest): void {
  checkObject('request', request, 'a pin request: { peer, source, start, hashes, wantsChecksums }');
  checkMethods('request.peer', request.peer, ['watch'], "the source rank's Peer");
  checkObject('request.source', request.source, 'the source rank: { workerId, incarnation, epoch, rank }');
  checkObject('request.source.rank', request.source.rank, 'a rank: { tpRank, ppRank }');
  if (!(request.hashes instanceof BigUint64Array))
    throw new EndpointOptionError('request.hashes', request.hashes, 'the chain hashes, a BigUint64Array');
  if (typeof request.wantsChecksums !== 'boolean')
    throw new EndpointOptionError('request.wantsChecksums', request.wantsChecksums, 'true or false');
}
