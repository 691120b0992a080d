// One source rank's side of the pin protocol: grants pins on the blocks its framework still holds, as
// leases its readers renew, and takes them back only at shutdown past its deadline. Every message is
// authenticated (pin-auth.ts); a grant's id is drawn at random, and only the grant's reader renews or
// releases it, each time with a sequence number above the last.
import { randomBytes } from 'node:crypto';
import type { RankId } from '@kvreuse/descriptors';
import { type Clock, type ReadersOutcome, type ReaderWait, systemClock } from '@kvreuse/drain';
import type { Notification, Peer } from '@kvreuse/native-bindings';
import { checkFunction, checkMethods, checkObject } from './argument-shapes.js';
import { type Deferred, deferred } from './deferred.js';
import { EndpointOptionError } from './errors.js';
import { tellEach, warnOfThrow } from './listeners.js';
import type { PinAdapter } from './pin-adapter.js';
import { PinChannel, type PinMessageRefusal } from './pin-auth.js';
import {
  looksLikePinMessage,
  type PinGrantMessage,
  type PinMessage,
  type PinRefusalReason,
  type PinRequestMessage,
  type PinRevocationReason,
  type PinSequencedMessage,
} from './pin-messages.js';

export interface PinSourceIdentity {
  readonly workerId: string;
  readonly incarnation: string;
  readonly epoch: number;
  readonly rank: RankId;
}

export interface PinServerOptions {
  /** This agent's pin messages, authenticated (the one channel of the agent: refusals are counted there). */
  readonly channel: PinChannel;
  readonly adapter: PinAdapter;
  readonly source: PinSourceIdentity;
  /**
   * The peer to answer a reader's agent on (loaded from its published metadata). A pin request passes
   * the reader it names; a renewal or release of a pin this server does not hold passes none.
   */
  readonly resolvePeer: (senderAgentName: string, reader?: PinRequestMessage['reader']) => Promise<Peer>;
  /**
   * Told once per peer `resolvePeer` answered when the server no longer uses it: once the request or
   * renewal is answered, or, for a granted pin, once the pin ended and its last answer was sent.
   */
  readonly givePeerBack?: (peer: Peer) => void;
  /** Per granted block, the checksum of what the requesting reader's rank will read from it. */
  readonly checksums: (request: PinRequestMessage, sourceBlocks: Uint32Array) => Uint32Array;
  /** How long a pin lives without a renewal. */
  readonly leaseMs: number;
  readonly clock?: Clock;
  /**
   * Told the number of pins held whenever it changes: a grant, a release, a lapse or a revocation. One that throws
   * is reported as a process warning; the pins are served as if it had not.
   */
  readonly onHeldChange?: (held: number) => void;
}

export type PinEnd = 'released' | 'lapsed' | 'revoked';

/** One pin the source held, and how it ended (absent while held). */
export interface ServedPin {
  /** The grant id the source drew. */
  readonly pinId: string;
  readonly readerAgent: string;
  readonly blocks: number;
  readonly ended?: PinEnd;
}

/** `ReadersOutcome` with each pin held when the wait began and how it ended (`revoked`: still held at the deadline). */
export interface PinReadersOutcome extends ReadersOutcome {
  readonly pins: readonly ServedPin[];
}

interface HeldServedPin {
  /** The grant id (also the adapter's pin id). */
  readonly pinId: string;
  readonly readerAgent: string;
  readonly peer: Peer;
  /** The last renewal's or release's sequence number (0: none yet). */
  sequence: number;
  readonly blocks: number;
  /** The lease's timer; undefined once the lease ended and is being judged. */
  timer: unknown;
  /** The handling of the renewals and releases taken for this pin, in the order they arrived (never rejects). */
  handling: Promise<void>;
  ended?: PinEnd;
  readonly ending: Deferred<PinEnd>;
}

const adapterMethods = ['requestPin', 'renewPin', 'releasePin', 'cancelPin', 'onEvicted'];
const serverKinds = new Set<PinMessage['kind']>(['request', 'renew', 'release']);

export class PinServer {
  readonly #options: PinServerOptions;
  readonly #clock: Clock;
  readonly #channel: PinChannel;
  /** Held pins by grant id. */
  readonly #pins = new Map<string, HeldServedPin>();
  /** When each request was seen, by `sender\0request id`, for two leases (`#seenRequest`). */
  readonly #requestsSeen = new Map<string, number>();
  /** Why new pin requests are refused, once they are. */
  #refusing: 'shutting-down' | 'engine-gone' | undefined;
  /** The handling of each message taken and not yet handled (it never rejects), with the message's kind. */
  readonly #inFlight = new Map<Promise<void>, PinMessage['kind']>();
  #malformed = 0;
  #unanswered = 0;

  /** Refuses options of another shape (`EndpointOptionError` naming the option). */
  constructor(options: PinServerOptions) {
    checkObject(
      'options',
      options,
      'PinServer options: { channel, adapter, source, resolvePeer, checksums, leaseMs, … }',
    );
    if (!(options.channel instanceof PinChannel))
      throw new EndpointOptionError('channel', options.channel, "this agent's PinChannel");
    checkMethods('adapter', options.adapter, adapterMethods, `a PinAdapter (${adapterMethods.join(', ')})`);
    checkObject('source', options.source, 'this rank as its readers name it: { workerId, incarnation, epoch, rank }');
    checkFunction('resolvePeer', options.resolvePeer);
    checkFunction('checksums', options.checksums);
    checkFunction('givePeerBack', options.givePeerBack, true);
    checkFunction('onHeldChange', options.onHeldChange, true);
    if (!Number.isSafeInteger(options.leaseMs) || options.leaseMs < 1 || options.leaseMs > 0xffffffff) {
      throw new EndpointOptionError('leaseMs', options.leaseMs, 'a whole number of milliseconds, 1 to 2^32 - 1');
    }
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#channel = options.channel;
  }

  /** Notifications that were not pin messages (ignored). */
  get malformedMessages(): number {
    return this.#malformed;
  }

  /** Answers that could not be sent (the reader's peer could not be resolved or reached). */
  get unansweredMessages(): number {
    return this.#unanswered;
  }

  /** Pins held now. */
  get heldPins(): number {
    return this.#pins.size;
  }

  /** Whether pin requests are refused (`refuseNewPins`, a drain waiting for the held pins, or `engineGone`). */
  get refusing(): boolean {
    return this.#refusing !== undefined;
  }

  /** From now on every pin request is refused as `shutting-down` (unless already as `engine-gone`); held pins stay held. */
  refuseNewPins(): void {
    this.#refusing ??= 'shutting-down';
  }

  /**
   * The engine that owns this rank's memory went away: from now on every pin request, and every renewal
   * of a pin this server no longer holds, is refused as `engine-gone`, and each pin held now is revoked
   * (`engine-gone`, the adapter's `cancelPin` first). Resolves once they are.
   */
  async engineGone(): Promise<void> {
    this.#refusing = 'engine-gone';
    for (const pin of [...this.#pins.values()]) await this.#revoke(pin, 'engine-gone');
  }

  /**
   * Takes one notification at once, and answers it in the background (`settled()`), so that an adapter
   * that answers slowly holds back no other message of the agent: false when it is not for a source (a
   * reader's message, or no pin message: counted and ignored). A pin message that fails its authentication
   * is refused (counted, unanswered). Requests are answered as their adapter answers; the renewals and
   * release of one pin in the order they arrived. Never throws.
   */
  receive(notification: Notification): boolean {
    if (!looksLikePinMessage(notification.data)) {
      this.#malformed++;
      return false;
    }
    const message = this.#channel.open(notification);
    if (message === undefined) return true;
    if (!serverKinds.has(message.kind)) return false;
    if (message.kind === 'request') this.#track('request', this.#request(notification.sender, message));
    else this.#track(message.kind, this.#take(notification.sender, message as PinSequencedMessage));
    return true;
  }

  /** Resolves once every message taken so far (and any taken meanwhile) is answered. */
  async settled(): Promise<void> {
    while (this.#inFlight.size > 0) await Promise.all(this.#inFlight.keys());
  }

  /** Keeps a message's handling in flight until it ends, counting it when it could not answer. */
  #track(kind: PinMessage['kind'], handling: Promise<void>): void {
    const tracked = handling.catch(() => {
      this.#unanswered++;
    });
    this.#inFlight.set(tracked, kind);
    void tracked.then(() => this.#inFlight.delete(tracked));
  }

  /**
   * Refuses new pins, then resolves once every pin held now is released or has lapsed, and each request
   * its adapter was answering is refused (its grant cancelled); at `wait.signal` (the deadline) the pins
   * still held are revoked and reported as outstanding (a request still being answered is refused and
   * cancelled when its adapter answers).
   */
  async waitForReaders(wait: ReaderWait): Promise<PinReadersOutcome> {
    this.refuseNewPins();
    const pins = [...this.#pins.values()];
    const deadline = deferred<void>();
    if (wait.signal.aborted) deadline.resolve();
    else wait.signal.addEventListener('abort', () => deadline.resolve(), { once: true });
    const requests = [...this.#inFlight].filter(([, kind]) => kind === 'request').map(([handling]) => handling);
    const ended = [...pins.map((pin) => pin.ending.promise), ...requests];
    await Promise.race([Promise.all(ended), deadline.promise]);
    for (const pin of pins) if (pin.ended === undefined) await this.#revoke(pin, 'shutting-down');
    const count = (end: PinEnd): number => pins.filter((pin) => pin.ended === end).length;
    return {
      released: count('released'),
      lapsed: count('lapsed'),
      outstanding: count('revoked'),
      pins: pins.map((pin) => ({
        pinId: pin.pinId,
        readerAgent: pin.readerAgent,
        blocks: pin.blocks,
        ...(pin.ended === undefined ? {} : { ended: pin.ended }),
      })),
    };
  }

  async #request(sender: string, request: PinRequestMessage): Promise<void> {
    // Never answered: a replay names a reader that did not ask again.
    if (this.#seenRequest(sender, request.pinId)) return this.#channel.refuse('replayed');
    const peer = await this.#options.resolvePeer(sender, request.reader);
    const answer = { granted: false };
    try {
      await this.#answer(sender, request, peer, answer);
    } finally {
      if (!answer.granted) this.#options.givePeerBack?.(peer);
    }
  }

  /** Answers a request from `sender` on `peer`; `granted` once a pin is held (the pin holds `peer` until it ends). */
  async #answer(sender: string, request: PinRequestMessage, peer: Peer, answer: { granted: boolean }): Promise<void> {
    const refusal = this.#refusalOf(request);
    const refuse = (reason: PinRefusalReason): void =>
      this.#send(peer, { kind: 'refuse', pinId: request.pinId, reason });
    if (refusal !== undefined) return refuse(refusal);
    const grantId = randomBytes(16).toString('hex');
    const blocks = await this.#adapterGrant(grantId, request);
    if (blocks === undefined || blocks.length === 0) return refuse('evicted');
    // Refusing began while the adapter answered: a drain has stopped waiting for new grants.
    if (this.#refusing !== undefined) {
      const reason = this.#refusing;
      await this.#adapterEnd('cancelPin', grantId);
      return refuse(reason);
    }
    try {
      // Sent before the pin is held: nothing the reader sends back can be taken before the pin is recorded below.
      this.#send(peer, this.#grantOf(request, grantId, blocks));
    } catch (error) {
      await this.#adapterEnd('cancelPin', grantId);
      throw error;
    }
    const pin: HeldServedPin = {
      pinId: grantId,
      readerAgent: sender,
      peer,
      sequence: 0,
      blocks: blocks.length,
      timer: undefined,
      handling: Promise.resolve(),
      ending: deferred<PinEnd>(),
    };
    this.#pins.set(grantId, pin);
    answer.granted = true;
    this.#tellHeld();
    this.#extend(pin);
  }

  /**
   * The blocks the adapter pins for `request` under `grantId`; undefined when its `requestPin` throws (a process
   * warning): the reader is refused as for blocks no longer held, a reason every reader's build reads.
   */
  async #adapterGrant(grantId: string, request: PinRequestMessage): Promise<Uint32Array | undefined> {
    try {
      return (await this.#options.adapter.requestPin(grantId, Array.from(request.hashes))).blocks;
    } catch (error) {
      warnOfThrow("a pin adapter's requestPin", error);
      return undefined;
    }
  }

  /** Whether the adapter still holds `pinId`: false when its `renewPin` answers false or throws (a process warning). */
  async #adapterRenewal(pinId: string): Promise<boolean> {
    try {
      return await this.#options.adapter.renewPin(pinId);
    } catch (error) {
      warnOfThrow("a pin adapter's renewPin", error);
      return false;
    }
  }

  /** Tells the adapter a pin ended (`method`); one that throws is a process warning: the pin has ended here all the same. */
  async #adapterEnd(method: 'releasePin' | 'cancelPin', pinId: string): Promise<void> {
    try {
      await this.#options.adapter[method](pinId);
    } catch (error) {
      warnOfThrow(`a pin adapter's ${method}`, error);
    }
  }

  /** The grant of `blocks` under `grantId`, with their checksums when the reader wants them. */
  #grantOf(request: PinRequestMessage, grantId: string, blocks: Uint32Array): PinGrantMessage {
    const { leaseMs } = this.#options;
    const grant = { kind: 'grant' as const, pinId: request.pinId, grantId, sourceBlocks: blocks, leaseMs };
    return request.wantsChecksums ? { ...grant, checksums: this.#options.checksums(request, blocks) } : grant;
  }

  /**
   * Whether `sender` sent request id `requestId` within the last two leases (its readers draw request
   * ids at random, so only a replay repeats one); remembers it otherwise.
   */
  #seenRequest(sender: string, requestId: string): boolean {
    const now = this.#clock.now();
    // In the order they were seen: the first one still within the window ends the pruning.
    for (const [key, at] of this.#requestsSeen) {
      if (now - at < 2 * this.#options.leaseMs) break;
      this.#requestsSeen.delete(key);
    }
    const key = `${sender}\u0000${requestId}`;
    if (this.#requestsSeen.has(key)) return true;
    this.#requestsSeen.set(key, now);
    return false;
  }

  #refusalOf(request: PinRequestMessage): PinRefusalReason | undefined {
    if (this.#refusing !== undefined) return this.#refusing;
    if (request.source.incarnation !== this.#options.source.incarnation) return 'stale-incarnation';
    if (request.source.epoch !== this.#options.source.epoch) return 'stale-epoch';
    return undefined;
  }

  /**
   * The held pin a renewal or release names, once it came from the pin's reader with a sequence number
   * above the last; undefined when no pin is held under its grant id; the refusal otherwise.
   */
  #heldFor(sender: string, message: PinSequencedMessage): HeldServedPin | PinMessageRefusal | undefined {
    const pin = this.#pins.get(message.pinId);
    if (pin === undefined) return undefined;
    if (pin.readerAgent !== sender) return 'not-reader';
    if (message.sequence <= pin.sequence) return 'replayed';
    pin.sequence = message.sequence;
    return pin;
  }

  /**
   * Takes a renewal or release: judged against its pin as it arrives, then handled after the pin's
   * earlier messages (so that its reader's renewals are answered in order).
   */
  async #take(sender: string, message: PinSequencedMessage): Promise<void> {
    const pin = this.#heldFor(sender, message);
    // Never answered: the sender may not be the pin's reader.
    if (typeof pin === 'string') return this.#channel.refuse(pin);
    if (pin === undefined) return this.#notHeld(sender, message);
    const handling = pin.handling.then(() =>
      message.kind === 'renew' ? this.#renewHeld(pin) : this.#releaseHeld(pin),
    );
    pin.handling = handling.catch(() => undefined);
    return handling;
  }

  /** Answers a renewal or release of a pin this server does not hold (released, lapsed, revoked or never granted). */
  async #notHeld(sender: string, message: PinSequencedMessage): Promise<void> {
    const { pinId } = message;
    const peer = await this.#options.resolvePeer(sender);
    try {
      if (message.kind === 'renew') this.#send(peer, { kind: 'refuse', pinId, reason: this.#notHeldReason() });
      else this.#send(peer, { kind: 'released', pinId });
    } finally {
      this.#options.givePeerBack?.(peer);
    }
  }

  async #renewHeld(pin: HeldServedPin): Promise<void> {
    const { pinId, peer } = pin;
    // Ended while an earlier message of the pin was answered (a lapse, a revocation): the adapter is not asked.
    if (pin.ended !== undefined) return this.#send(peer, { kind: 'refuse', pinId, reason: this.#notHeldReason() });
    const renewed = await this.#adapterRenewal(pinId);
    // Ended while the adapter answered: released, or revoked by the engine's end.
    if (pin.ended !== undefined) return this.#send(peer, { kind: 'refuse', pinId, reason: this.#notHeldReason() });
    if (!renewed) {
      const ended = this.#end(pin, 'revoked');
      // Cancelled even when the adapter says it no longer knows the pin: every granted pin ends there once.
      return this.#lastAnswer(pin, ended, async () => {
        await this.#adapterEnd('cancelPin', pinId);
        this.#send(peer, { kind: 'refuse', pinId, reason: 'evicted' });
      });
    }
    this.#extend(pin);
    this.#send(peer, { kind: 'renewed', pinId, leaseMs: this.#options.leaseMs });
  }

  /** Why a renewal of a pin this server does not hold is refused. */
  #notHeldReason(): PinRefusalReason {
    return this.#refusing === 'engine-gone' ? 'engine-gone' : 'unknown-pin';
  }

  async #releaseHeld(pin: HeldServedPin): Promise<void> {
    const ended = this.#end(pin, 'released');
    await this.#lastAnswer(pin, ended, async () => {
      if (ended) await this.#adapterEnd('releasePin', pin.pinId);
      this.#send(pin.peer, { kind: 'released', pinId: pin.pinId });
    });
  }

  async #revoke(pin: HeldServedPin, reason: PinRevocationReason): Promise<void> {
    if (!this.#end(pin, 'revoked')) return;
    await this.#lastAnswer(pin, true, async () => {
      await this.#adapterEnd('cancelPin', pin.pinId);
      try {
        this.#send(pin.peer, { kind: 'revoke', pinId: pin.pinId, reason });
      } catch {
        this.#unanswered++;
      }
    });
  }

  /** Sends an answer about `pin`; the pin's reader peer is given back after it when this answer ended the pin (`ended`). */
  async #lastAnswer(pin: HeldServedPin, ended: boolean, answer: () => unknown): Promise<void> {
    try {
      await answer();
    } finally {
      if (ended) this.#options.givePeerBack?.(pin.peer);
    }
  }

  #extend(pin: HeldServedPin): void {
    if (pin.timer !== undefined) this.#clock.clearTimer(pin.timer);
    pin.timer = this.#clock.setTimer(() => this.#leaseEnded(pin), this.#options.leaseMs);
  }

  /**
   * At the end of a lease: the reader's renewal may have arrived in time while the JavaScript thread was held
   * (a long synchronous call, a loaded machine), its notification not yet read. What the agent received is
   * delivered first, and the pin lapses only if no renewal among it, nor one taken before (its adapter perhaps
   * still answering), renewed it.
   */
  #leaseEnded(pin: HeldServedPin): void {
    pin.timer = undefined;
    this.#channel.deliverPending();
    setImmediate(() => void this.#lapseUnlessRenewed(pin));
  }

  async #lapseUnlessRenewed(pin: HeldServedPin): Promise<void> {
    await pin.handling;
    if (pin.timer === undefined && this.#end(pin, 'lapsed'))
      await this.#lastAnswer(pin, true, () => this.#adapterEnd('releasePin', pin.pinId));
  }

  /**
   * Ends `pin` as `end`, before the adapter hears of it: false when it had ended already, so that the adapter is
   * told of each pin's end once (a release and a lapse can meet while the adapter answers one of them).
   */
  #end(pin: HeldServedPin, end: PinEnd): boolean {
    if (pin.ended !== undefined) return false;
    pin.ended = end;
    if (pin.timer !== undefined) this.#clock.clearTimer(pin.timer);
    this.#pins.delete(pin.pinId);
    this.#tellHeld();
    pin.ending.resolve(end);
    return true;
  }

  /** Tells `onHeldChange` the pins held now; a throw of it is reported as a warning and changes nothing here. */
  #tellHeld(): void {
    const { onHeldChange } = this.#options;
    if (onHeldChange !== undefined) tellEach([onHeldChange], this.#pins.size, 'a pins-held listener');
  }

  #send(peer: Peer, message: PinMessage): void {
    this.#channel.send(peer, message);
  }
}
