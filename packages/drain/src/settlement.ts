/**
 * A value settled at most once, and the promise of it made only when someone asks for it: most of a
 * ledger's operations are never awaited one by one (a drain waits for them all at once), and a promise
 * with its resolving functions costs several objects per operation.
 */
export class Settlement<T> {
  #settled = false;
  #value: T | undefined;
  #promise: Promise<T> | undefined;
  #resolve: ((value: T) => void) | undefined;

  get settled(): boolean {
    return this.#settled;
  }

  /** The same promise on every call; already resolved when asked for after `settle`. */
  get promise(): Promise<T> {
    this.#promise ??= this.#settled
      ? Promise.resolve(this.#value as T)
      : new Promise<T>((resolve) => (this.#resolve = resolve));
    return this.#promise;
  }

  /** Settles with `value`; false (and nothing changes) when it was settled already. */
  settle(value: T): boolean {
    if (this.#settled) return false;
    this.#settled = true;
    this.#value = value;
    this.#resolve?.(value);
    this.#resolve = undefined;
    return true;
  }
}
