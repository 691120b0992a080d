import { describe, expect, it } from 'vitest';
import { PolledQueue } from './polled-queue.js';

/** A queue filled from an array that stands in for the native library's queue. */
class ArrayQueue extends PolledQueue<number> {
  readonly source: number[] = [];
  /** `hasWaiters` as each call of onWaitersChanged saw it. */
  readonly waitersSeen: boolean[] = [];

  constructor() {
    super(() => this.waitersSeen.push(this.hasWaiters));
  }

  protected fill(push: (item: number) => void): void {
    for (const item of this.source.splice(0)) push(item);
  }
}

describe('PolledQueue', () => {
  it('hands drained items to waiters first, in order, and keeps the rest for takeAll and next', async () => {
    const queue = new ArrayQueue();
    const first = queue.next();
    const second = queue.next();
    expect(queue.hasWaiters).toBe(true);
    queue.source.push(1, 2, 3, 4);
    queue.drain();
    await expect(Promise.all([first, second])).resolves.toEqual([1, 2]);
    expect(queue.hasWaiters).toBe(false);
    await expect(queue.next()).resolves.toBe(3);
    queue.source.push(5);
    expect(queue.takeAll()).toEqual([4, 5]);
    expect(queue.takeAll()).toEqual([]);
    // Told after every drain and whenever a caller starts waiting: next, next, drain, next, takeAll, takeAll.
    expect(queue.waitersSeen).toEqual([false, true, true, true, false, false, false, false]);
  });

  it('rejects every waiter on close and drops what it kept', async () => {
    const queue = new ArrayQueue();
    const waiting = queue.next();
    const closed = new Error('closed');
    queue.close(closed);
    await expect(waiting).rejects.toBe(closed);
    queue.source.push(7);
    queue.drain();
    queue.close(closed);
    expect(queue.takeAll()).toEqual([]);
  });
});
