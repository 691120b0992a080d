import { InvalidArgumentError } from './errors.js';
import type { AgentContext } from './handles.js';
import { check } from './library.js';
import type { Peer } from './peer.js';
import { WaitQueue } from './wait-queue.js';

/** A message received from a peer. */
export interface Notification {
  /** The sending agent's name. */
  readonly sender: string;
  readonly data: Buffer;
}

const MAX_NAME = 255;
const MAX_NOTIFICATION = 4096;

/** An agent's received notifications: drained from the native queue on every wake-up, handed out in order. */
export class Notifications {
  readonly #agent: AgentContext;
  readonly #onWaitersChanged: () => void;
  readonly #queue = new WaitQueue<Notification>();
  readonly #sender = Buffer.alloc(MAX_NAME + 1);
  readonly #data = Buffer.alloc(MAX_NOTIFICATION);
  readonly #length = new Uint32Array(1);
  readonly #got = new Uint32Array(1);

  constructor(agent: AgentContext, onWaitersChanged: () => void) {
    this.#agent = agent;
    this.#onWaitersChanged = onWaitersChanged;
  }

  get hasWaiters(): boolean {
    return this.#queue.hasWaiters;
  }

  send(peer: Peer, data: Uint8Array | string): void {
    peer.assertOpen('send a notification');
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (!(bytes instanceof Uint8Array)) throw new InvalidArgumentError('data', data, 'must be a Uint8Array or a string');
    const { library, id } = this.#agent;
    check(library, 'kvt_notify_send', library.api.kvt_notify_send(id, peer.id, peer.generation, bytes, bytes.length));
  }

  /** Moves every notification the native library holds to waiters, then to the queue. */
  drain(): void {
    const { library, id } = this.#agent;
    for (;;) {
      check(
        library,
        'kvt_notify_poll',
        library.api.kvt_notify_poll(id, this.#sender, this.#sender.length, this.#data, this.#data.length, this.#length, this.#got),
      );
      if (this.#got[0] !== 1) break;
      const nameEnd = this.#sender.indexOf(0);
      const notification: Notification = {
        sender: this.#sender.toString('latin1', 0, nameEnd === -1 ? this.#sender.length : nameEnd),
        data: Buffer.from(this.#data.subarray(0, this.#length[0] ?? 0)),
      };
      this.#queue.push(notification);
    }
    this.#onWaitersChanged();
  }

  takeAll(): Notification[] {
    this.drain();
    return this.#queue.takeAll();
  }

  next(): Promise<Notification> {
    this.drain();
    return this.#queue.next(this.#onWaitersChanged);
  }

  close(error: Error): void {
    this.#queue.close(error);
  }
}
