import { messageOf } from '@kvreuse/errors';

type Listener = (...args: never[]) => void;

/** A typed listener list per event name; a throwing listener does not stop the others. */
export class Listeners<Events extends { [Event in keyof Events]: Listener }> {
  readonly #listeners = new Map<keyof Events, Set<Listener>>();

  /** Adds a listener; the returned function removes it. */
  on<Event extends keyof Events>(event: Event, listener: Events[Event]): () => void {
    let set = this.#listeners.get(event);
    if (set === undefined) {
      set = new Set();
      this.#listeners.set(event, set);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  emit<Event extends keyof Events>(event: Event, ...args: Parameters<Events[Event]>): void {
    const listeners = this.#listeners.get(event);
    if (listeners === undefined) return;
    for (const listener of listeners) {
      try {
        (listener as (...values: Parameters<Events[Event]>) => void)(...args);
      } catch (error) {
        process.emitWarning(`drain: a "${String(event)}" listener threw: ${messageOf(error)}`);
      }
    }
  }
}
