interface Waiter<T> {
  readonly resolve: (item: T) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Items the native library queues for an agent (notifications, peer reports), moved here by `drain()` on
 * every wake-up and handed out in arrival order: to callers already waiting (`next()`), else kept until
 * taken. `close(error)` rejects every waiter and drops what is kept.
 */
export abstract class PolledQueue<T> {
  readonly #onWaitersChanged: () => void;
  readonly #items: T[] = [];
  readonly #waiters: Waiter<T>[] = [];

  /** `onWaitersChanged` runs after each drain and whenever a caller starts waiting. */
  constructor(onWaitersChanged: () => void) {
    this.#onWaitersChanged = onWaitersChanged;
  }

  /** Takes everything the native library holds, passing each item to `push` in order. */
  protected abstract fill(push: (item: T) => void): void;

  get hasWaiters(): boolean {
    return this.#waiters.length > 0;
  }

  drain(): void {
    this.fill((item) => {
      const waiter = this.#waiters.shift();
      if (waiter === undefined) this.#items.push(item);
      else waiter.resolve(item);
    });
    this.#onWaitersChanged();
  }

  takeAll(): T[] {
    this.drain();
    return this.#items.splice(0);
  }

  next(): Promise<T> {
    this.drain();
    const kept = this.#items.shift();
    if (kept !== undefined) return Promise.resolve(kept);
    return new Promise<T>((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
      this.#onWaitersChanged();
    });
  }

  close(error: Error): void {
    for (const waiter of this.#waiters.splice(0)) waiter.reject(error);
    this.#items.length = 0;
  }
}
