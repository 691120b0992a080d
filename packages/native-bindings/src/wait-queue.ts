interface Waiter<T> {
  readonly resolve: (item: T) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Items handed out in arrival order: to callers already waiting (`next()`), else kept until taken.
 * `close(error)` rejects every waiter and drops what is kept.
 */
export class WaitQueue<T> {
  readonly #items: T[] = [];
  readonly #waiters: Waiter<T>[] = [];

  get hasWaiters(): boolean {
    return this.#waiters.length > 0;
  }

  push(item: T): void {
    const waiter = this.#waiters.shift();
    if (waiter === undefined) this.#items.push(item);
    else waiter.resolve(item);
  }

  takeAll(): T[] {
    return this.#items.splice(0);
  }

  /** The oldest kept item, or a promise of the next one; `onWait` runs when the caller has to wait. */
  next(onWait: () => void): Promise<T> {
    const kept = this.#items.shift();
    if (kept !== undefined) return Promise.resolve(kept);
    return new Promise<T>((resolve, reject) => {
      this.#waiters.push({ resolve, reject });
      onWait();
    });
  }

  close(error: Error): void {
    for (const waiter of this.#waiters.splice(0)) waiter.reject(error);
    this.#items.length = 0;
  }
}
