// What a side of `kvreuse bench link` opened (connection, agent, memory), undone in reverse on every
// exit path: its end, a failure, or an interruption of the process.
import type { CliContext } from '../command.js';

export class Teardown {
  readonly #undos: (() => unknown)[] = [];
  readonly #takeBack: () => void;

  constructor(context: CliContext) {
    this.#takeBack = context.whenInterrupted?.(() => this.#undoAll()) ?? (() => undefined);
  }

  /** Registers how to undo what was just opened; returns `value` for chaining. */
  add<T>(value: T, undo: (value: T) => unknown): T {
    this.#undos.push(() => undo(value));
    return value;
  }

  async #undoAll(): Promise<void> {
    for (const undo of this.#undos.splice(0).reverse()) {
      try {
        await undo();
      } catch {
        // the next one still runs: what is left to undo must not stay because an earlier undo failed
      }
    }
  }

  /** Undoes everything registered, last first, and stops listening for interruptions. */
  async close(): Promise<void> {
    this.#takeBack();
    await this.#undoAll();
  }
}
