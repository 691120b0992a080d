import { describe, expect, it } from 'vitest';
import { WaitQueue } from './wait-queue.js';

describe('WaitQueue', () => {
  it('hands items to waiters first, in order, and keeps the rest for takeAll and next', async () => {
    const queue = new WaitQueue<number>();
    let waits = 0;
    const first = queue.next(() => waits++);
    const second = queue.next(() => waits++);
    expect([waits, queue.hasWaiters]).toEqual([2, true]);
    for (const item of [1, 2, 3, 4]) queue.push(item);
    await expect(Promise.all([first, second])).resolves.toEqual([1, 2]);
    expect(queue.hasWaiters).toBe(false);
    await expect(queue.next(() => waits++)).resolves.toBe(3);
    expect(waits).toBe(2);
    expect(queue.takeAll()).toEqual([4]);
    expect(queue.takeAll()).toEqual([]);
  });

  it('rejects every waiter on close and drops what it kept', async () => {
    const queue = new WaitQueue<string>();
    const waiting = queue.next(() => undefined);
    const closed = new Error('closed');
    queue.close(closed);
    await expect(waiting).rejects.toBe(closed);
    queue.push('late');
    queue.close(closed);
    expect(queue.takeAll()).toEqual([]);
  });
});
