import { describe, expect, it, vi } from 'vitest';
import { testedBackends, transport } from '../test/support/backends.js';
import { piecewiseDescriptors } from '../test/support/content.js';
import { openPair, readRequest } from '../test/support/pair.js';
import { HandleClosedError } from './errors.js';
import { openLibrary } from './library.js';

describe.each(testedBackends)('notifications on %s', (backend) => {
  it('delivers messages in order with the sender name, by poll and by await', async () => {
    const pair = await openPair(backend, 4096, 71);
    pair.reader.sendNotification(pair.sourcePeer, 'first');
    pair.reader.sendNotification(pair.sourcePeer, Uint8Array.of(1, 2, 3));
    const next = await pair.source.nextNotification();
    expect(next).toEqual({ sender: pair.reader.name, data: Buffer.from('first') });
    let rest = pair.source.pollNotifications();
    while (rest.length === 0) {
      await new Promise((resolve) => setImmediate(resolve));
      rest = pair.source.pollNotifications();
    }
    expect(rest).toEqual([{ sender: pair.reader.name, data: Buffer.from([1, 2, 3]) }]);
    expect(pair.source.counters()).toMatchObject({ notificationsReceived: 2, pendingNotifications: 0 });
    expect(pair.reader.counters().notificationsSent).toBe(2);

    const waiting = pair.reader.nextNotification();
    pair.source.sendNotification(pair.readerPeer, 'reply');
    await expect(waiting).resolves.toEqual({ sender: pair.source.name, data: Buffer.from('reply') });
    await pair.close();
  });

  it('a wake-up for completions alone does not poll notifications: the completion poll says none are queued', async () => {
    const pair = await openPair(backend, 4096, 73);
    const notifyPoll = vi.spyOn(openLibrary(transport.libraryPath).api, 'kvt_notify_poll');
    try {
      for (let i = 0; i < 3; i++) {
        const operation = pair.reader.post(readRequest(pair, piecewiseDescriptors(1, 4096)));
        await expect(operation.done).resolves.toEqual({ bytesDone: 4096 });
        operation.release();
      }
      expect(notifyPoll).not.toHaveBeenCalled();
      const waiting = pair.reader.nextNotification(); // polls once itself, then waits for a wake-up
      pair.source.sendNotification(pair.readerPeer, 'after');
      await expect(waiting).resolves.toEqual({ sender: pair.source.name, data: Buffer.from('after') });
    } finally {
      notifyPoll.mockRestore();
    }
    await pair.close();
  });

  it('deliverPending delivers, within the call, a completion and a notification no wake-up was read for', async () => {
    const pair = await openPair(backend, 4096, 74);
    const waiting = pair.source.nextNotification();
    const operation = pair.reader.post(readRequest(pair, piecewiseDescriptors(1, 4096)));
    pair.reader.sendNotification(pair.sourcePeer, 'held');
    // Held here, synchronously, until both wait in the library: no wake-up of either agent is read meanwhile.
    const givenUpAt = performance.now() + 10_000;
    const arrived = () =>
      pair.reader.counters().inflightOperations === 0 && pair.source.counters().pendingNotifications === 1;
    while (!arrived() && performance.now() < givenUpAt);
    expect(arrived()).toBe(true);
    expect(operation.isSettled).toBe(false);
    pair.reader.deliverPending();
    pair.source.deliverPending();
    expect(operation.isSettled).toBe(true);
    expect(pair.source.counters().pendingNotifications).toBe(0);
    await expect(operation.done).resolves.toEqual({ bytesDone: 4096 });
    await expect(waiting).resolves.toEqual({ sender: pair.reader.name, data: Buffer.from('held') });
    operation.release();
    await pair.close();
    pair.reader.deliverPending(); // closed: nothing to deliver, no error
  });

  it('refuses empty and oversized messages with INVALID_PARAM', async () => {
    const pair = await openPair(backend, 4096, 72);
    const max = transport.capabilities().limits.maxNotificationBytes;
    expect(() => pair.reader.sendNotification(pair.sourcePeer, new Uint8Array(0))).toThrow(
      expect.objectContaining({ code: 'INVALID_PARAM', call: 'kvt_notify_send' }),
    );
    expect(() => pair.reader.sendNotification(pair.sourcePeer, new Uint8Array(max + 1))).toThrow(
      expect.objectContaining({ code: 'INVALID_PARAM', call: 'kvt_notify_send' }),
    );
    pair.reader.sendNotification(pair.sourcePeer, new Uint8Array(max));
    await pair.close();
  });

  it('iterates over arriving notifications until the agent closes', async () => {
    const pair = await openPair(backend, 4096, 74);
    const received: string[] = [];
    const iteration = (async () => {
      for await (const notification of pair.source.notifications()) received.push(notification.data.toString());
    })();
    pair.reader.sendNotification(pair.sourcePeer, 'one');
    pair.reader.sendNotification(pair.sourcePeer, 'two');
    while (received.length < 2) await new Promise((resolve) => setImmediate(resolve));
    await pair.close();
    await iteration;
    expect(received).toEqual(['one', 'two']);
  });

  it('rejects a pending wait when the agent closes', async () => {
    const pair = await openPair(backend, 4096, 73);
    const rejected = expect(pair.reader.nextNotification()).rejects.toBeInstanceOf(HandleClosedError);
    await pair.close();
    await rejected;
  });
});
