// The one consumer of an agent's notifications and heartbeat reports: each notification goes to the
// handlers in turn until one takes it (the pin server takes a source's messages, the pin client a
// reader's; other kinds may be added), and each peer event goes to every peer-event handler. A handler
// that fails is counted and the router goes on: one bad handler must not end the agent's only consumer.
import type { Agent, Notification, PeerEvent } from '@kvreuse/native-bindings';
import { EndpointOptionError } from './errors.js';

/**
 * Takes a notification meant for it (returns or resolves true); false passes it on to the next handler. A
 * handler that returns a promise holds back every later notification of the agent until it settles: one
 * whose answer is slow takes the notification at once and answers it on its own (as `PinServer` does).
 */
export type NotificationHandler = (notification: Notification) => boolean | Promise<boolean>;
export type PeerEventHandler = (event: PeerEvent) => void;

export interface NotificationRouterOptions {
  /** Told of each handler that threw or rejected, with what it failed on; the router goes on either way. */
  readonly onHandlerFailure?: (error: unknown, failedOn: Notification | PeerEvent) => void;
}

export class NotificationRouter {
  readonly #handlers: NotificationHandler[] = [];
  readonly #peerHandlers: PeerEventHandler[] = [];
  readonly #onHandlerFailure: NotificationRouterOptions['onHandlerFailure'];
  #unclaimed = 0;
  #handlerFailures = 0;
  #running: Promise<void> | undefined;

  constructor(options: NotificationRouterOptions = {}) {
    const { onHandlerFailure } = options;
    if (onHandlerFailure !== undefined && typeof onHandlerFailure !== 'function')
      throw new EndpointOptionError('onHandlerFailure', onHandlerFailure, 'a function (error, failedOn) => void');
    this.#onHandlerFailure = onHandlerFailure;
  }

  /**
   * Adds a handler; handlers are asked in the order they were added. Returns the removal function.
   * `EndpointOptionError` for a handler that is no function.
   */
  addHandler(handler: NotificationHandler): () => void {
    if (typeof handler !== 'function')
      throw new EndpointOptionError('handler', handler, 'a function (notification) => boolean | Promise<boolean>');
    this.#handlers.push(handler);
    return () => removeFrom(this.#handlers, handler);
  }

  /** Adds a peer-event handler; returns the removal function. `EndpointOptionError` for a handler that is no function. */
  addPeerEventHandler(handler: PeerEventHandler): () => void {
    if (typeof handler !== 'function') throw new EndpointOptionError('handler', handler, 'a function (event) => void');
    this.#peerHandlers.push(handler);
    return () => removeFrom(this.#peerHandlers, handler);
  }

  /** Notifications no handler took. */
  get unclaimedNotifications(): number {
    return this.#unclaimed;
  }

  /** Handlers that threw or rejected, on a notification or a peer event. */
  get handlerFailures(): number {
    return this.#handlerFailures;
  }

  /**
   * Starts consuming `agent`'s notifications and peer events (once); both loops end when the agent
   * closes. Notifications are dispatched in arrival order, each one's handler finishing first.
   */
  start(agent: Pick<Agent, 'notifications' | 'peerEvents'>): void {
    if (this.#running !== undefined) return;
    this.#running = Promise.all([
      this.#consume(agent.notifications()),
      this.#consumePeerEvents(agent.peerEvents()),
    ]).then(() => undefined);
  }

  /** Resolves once both loops ended (after the agent closed); at once when never started. */
  stopped(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  async #consume(notifications: AsyncIterable<Notification>): Promise<void> {
    try {
      for await (const notification of notifications) await this.dispatch(notification);
    } catch {
      // The agent closed while a notification was awaited: nothing more will arrive.
    }
  }

  async #consumePeerEvents(events: AsyncIterable<PeerEvent>): Promise<void> {
    try {
      for await (const event of events)
        for (const handler of [...this.#peerHandlers]) {
          try {
            handler(event);
          } catch (error) {
            this.#failed(error, event);
          }
        }
    } catch {
      // The agent closed while an event was awaited.
    }
  }

  /**
   * Hands one notification to the handlers in order until one takes it. One that throws or rejects is
   * counted as failed (`handlerFailures`, `onHandlerFailure`) and the notification goes to no other.
   */
  async dispatch(notification: Notification): Promise<boolean> {
    for (const handler of [...this.#handlers]) {
      try {
        if (await handler(notification)) return true;
      } catch (error) {
        this.#failed(error, notification);
        return true;
      }
    }
    this.#unclaimed++;
    return false;
  }

  #failed(error: unknown, failedOn: Notification | PeerEvent): void {
    this.#handlerFailures++;
    try {
      this.#onHandlerFailure?.(error, failedOn);
    } catch {
      // The listener's own failure is not the router's to report.
    }
  }
}

function removeFrom<T>(list: T[], item: T): void {
  const index = list.indexOf(item);
  if (index >= 0) list.splice(index, 1);
}
