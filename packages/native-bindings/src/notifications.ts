import { InvalidArgumentError } from './errors.js';
import type { AgentContext } from './handles.js';
import { check } from './library.js';
import type { Peer } from './peer.js';
import { PolledQueue } from './polled-queue.js';

/** A message received from a peer. */
export interface Notification {
  /** The sending agent's name. */
  readonly sender: string;
  readonly data: Buffer;
}

const MAX_NAME = 255;
const MAX_NOTIFICATION = 4096;

/** An agent's received notifications: drained from the native queue on every wake-up, handed out in order. */
export class Notifications extends PolledQueue<Notification> {
  readonly #agent: AgentContext;
  readonly #sender = Buffer.alloc(MAX_NAME + 1);
  readonly #data = Buffer.alloc(MAX_NOTIFICATION);
  readonly #length = new Uint32Array(1);
  readonly #got = new Uint32Array(1);

  constructor(agent: AgentContext, onWaitersChanged: () => void) {
    super(onWaitersChanged);
    this.#agent = agent;
  }

  send(peer: Peer, data: Uint8Array | string): void {
    peer.assertOpen('send a notification');
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (!(bytes instanceof Uint8Array))
      throw new InvalidArgumentError('data', data, 'must be a Uint8Array or a string');
    const { library, id } = this.#agent;
    check(library, 'kvt_notify_send', library.api.kvt_notify_send(id, peer.id, peer.generation, bytes, bytes.length));
  }

  protected fill(push: (notification: Notification) => void): void {
    const { library, id } = this.#agent;
    for (;;) {
      check(
        library,
        'kvt_notify_poll',
        library.api.kvt_notify_poll(
          id,
          this.#sender,
          this.#sender.length,
          this.#data,
          this.#data.length,
          this.#length,
          this.#got,
        ),
      );
      if (this.#got[0] !== 1) break;
      const nameEnd = this.#sender.indexOf(0);
      const notification: Notification = {
        sender: this.#sender.toString('latin1', 0, nameEnd === -1 ? this.#sender.length : nameEnd),
        data: Buffer.from(this.#data.subarray(0, this.#length[0] ?? 0)),
      };
      push(notification);
    }
  }
}
