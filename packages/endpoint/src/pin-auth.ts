// Pin messages as authenticated notifications: each carries, after its bytes, a tag (HMAC-SHA256
// truncated to 16 bytes) under a key derived from the cluster secret for pin messages alone, over the
// sending agent's name, the receiving agent's name and the message. A process without the secret can
// neither forge a message nor pass one meant for another pair of agents off as its own.
import { timingSafeEqual } from 'node:crypto';
import { ClusterSecret } from '@kvreuse/discovery';
import type { Agent, Notification, Peer } from '@kvreuse/native-bindings';
import { checkFunction, checkMethods, checkObject } from './argument-shapes.js';
import { EndpointOptionError, PinMessageError } from './errors.js';
import { tellEach } from './listeners.js';
import { encodePinMessage, maxPinMessageBytes, type PinMessage, safeParsePinMessage } from './pin-messages.js';

export const pinTagBytes = 16;
/** The HKDF label of the pin messages' key (its own: no other use of the secret shares it). */
const pinPurpose = 'pin messages';

/** Why a received pin message was refused (`kvreuse_pin_messages_refused_total{reason}`). */
export const pinMessageRefusals = [
  /** Its tag is not the one the cluster secret gives for this sender, receiver and message. */
  'unauthenticated',
  /** Authenticated, but not a pin message this build reads. */
  'malformed',
  /** A renewal or release of a grant from an agent that is not the grant's reader. */
  'not-reader',
  /** An answer, renewal confirmation, release acknowledgement or revocation from an agent that is not the pin's source. */
  'not-source',
  /**
   * A renewal or release whose sequence number is not above the last one seen for its grant, or a pin
   * request whose id its sender used within the last two leases.
   */
  'replayed',
] as const;
export type PinMessageRefusal = (typeof pinMessageRefusals)[number];

export type OpenedPinMessage =
  | { readonly success: true; readonly data: PinMessage }
  | { readonly success: false; readonly reason: 'unauthenticated' | 'malformed'; readonly error: PinMessageError };

const encoder = new TextEncoder();

export interface PinChannelOptions {
  readonly agent: Pick<Agent, 'sendNotification' | 'name'> & Partial<Pick<Agent, 'deliverPending'>>;
  readonly secret: ClusterSecret;
  /** Told each refused message's reason (after it was counted). One that throws is reported as a process warning; the message is refused all the same. */
  readonly onRefused?: (reason: PinMessageRefusal) => void;
}

/** One agent's pin messages: sealed for the peer they go to, opened from the agent that sent them, refusals counted. */
export class PinChannel {
  readonly #options: PinChannelOptions;
  readonly #refused = new Map<PinMessageRefusal, number>();

  /** Refuses options of another shape (`EndpointOptionError` naming the option). */
  constructor(options: PinChannelOptions) {
    checkObject('options', options, 'PinChannel options: { agent, secret, onRefused? }');
    checkMethods('agent', options.agent, ['sendNotification'], "this rank's Agent (its sendNotification and name)");
    if (typeof options.agent.name !== 'string')
      throw new EndpointOptionError('agent.name', options.agent.name, "the agent's name");
    if (!(options.secret instanceof ClusterSecret))
      throw new EndpointOptionError('secret', options.secret, 'the ClusterSecret the cluster shares');
    checkFunction('onRefused', options.onRefused, true);
    this.#options = options;
  }

  /** Messages refused, by reason (every reason present, 0 when none). */
  get refusedMessages(): Readonly<Record<PinMessageRefusal, number>> {
    return Object.fromEntries(pinMessageRefusals.map((reason) => [reason, this.#refused.get(reason) ?? 0])) as Record<
      PinMessageRefusal,
      number
    >;
  }

  /** Sends `message` to `peer`, tagged for this agent and the peer's. */
  send(peer: Peer, message: PinMessage): void {
    const { agent, secret } = this.#options;
    agent.sendNotification(peer, sealPinMessage(secret, agent.name, peer.name, message));
  }

  /** Delivers what the agent already received (`Agent.deliverPending`), where the agent can. */
  deliverPending(): void {
    this.#options.agent.deliverPending?.();
  }

  /** The message in `notification`, once its tag is verified for its sender and this agent; a refusal is counted. */
  open(notification: Notification): PinMessage | undefined {
    const opened = openPinMessage(
      this.#options.secret,
      notification.sender,
      this.#options.agent.name,
      notification.data,
    );
    if (opened.success) return opened.data;
    this.refuse(opened.reason);
    return undefined;
  }

  /** Counts a refused message and tells `onRefused`. */
  refuse(reason: PinMessageRefusal): void {
    this.#refused.set(reason, (this.#refused.get(reason) ?? 0) + 1);
    const { onRefused } = this.#options;
    if (onRefused !== undefined) tellEach([onRefused], reason, 'a pin refusal listener');
  }
}

/** `message`'s bytes and their tag for `sender` to `receiver`: the notification that carries it. */
export function sealPinMessage(
  secret: ClusterSecret,
  sender: string,
  receiver: string,
  message: PinMessage,
): Uint8Array {
  return sealPinBytes(secret, sender, receiver, encodePinMessage(message));
}

/** `bytes` and their tag for `sender` to `receiver` (whatever the bytes hold: `sealPinMessage` seals a message). */
export function sealPinBytes(secret: ClusterSecret, sender: string, receiver: string, bytes: Uint8Array): Uint8Array {
  const sealed = new Uint8Array(bytes.length + pinTagBytes);
  sealed.set(bytes);
  sealed.set(pinTag(secret, sender, receiver, bytes), bytes.length);
  return sealed;
}

/** The message in `notification` from `sender` to `receiver`, once its tag is verified; never throws. */
export function openPinMessage(
  secret: ClusterSecret,
  sender: string,
  receiver: string,
  notification: Uint8Array,
): OpenedPinMessage {
  if (notification.length < pinTagBytes || notification.length > maxPinMessageBytes + pinTagBytes) {
    const error = new PinMessageError(`${notification.length} bytes is no authenticated pin message`);
    return { success: false, reason: 'unauthenticated', error };
  }
  const split = notification.length - pinTagBytes;
  const bytes = notification.subarray(0, split);
  if (!timingSafeEqual(notification.subarray(split), pinTag(secret, sender, receiver, bytes))) {
    const error = new PinMessageError(`its tag is not the cluster secret's for ${sender} to ${receiver}`);
    return { success: false, reason: 'unauthenticated', error };
  }
  const parsed = safeParsePinMessage(bytes);
  return parsed.success ? parsed : { success: false, reason: 'malformed', error: parsed.error };
}

function pinTag(secret: ClusterSecret, sender: string, receiver: string, bytes: Uint8Array): Uint8Array {
  return secret
    .authenticate(pinPurpose, lengthPrefixed(sender), lengthPrefixed(receiver), bytes)
    .subarray(0, pinTagBytes);
}

/** `name` as its UTF-8 byte count (u32, little-endian) and bytes: no two (sender, receiver) pairs run together alike. */
function lengthPrefixed(name: string): Uint8Array {
  const encoded = encoder.encode(name);
  const prefixed = new Uint8Array(4 + encoded.length);
  new DataView(prefixed.buffer).setUint32(0, encoded.length, true);
  prefixed.set(encoded, 4);
  return prefixed;
}
