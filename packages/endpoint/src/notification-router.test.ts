// The notification router on two real loopback agents: one consumer, handlers asked in order.
import { type Agent, loadTransport, type Notification } from '@kvreuse/native-bindings';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EndpointOptionError } from './errors.js';
import { NotificationRouter } from './notification-router.js';

const transport = loadTransport();
const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.close()));
});

describe('NotificationRouter', () => {
  it('hands each notification to the first handler that takes it, counts the ones nobody takes, and stops when the agent closes', async () => {
    const receiver = await transport.createAgent({ name: `router-receiver-${process.pid}`, backend: 'loopback' });
    const sender = await transport.createAgent({ name: `router-sender-${process.pid}`, backend: 'loopback' });
    agents.push(sender);
    const peer = sender.loadPeer(receiver.metadata());
    const router = new NotificationRouter();
    const pins: string[] = [];
    const others: string[] = [];
    router.addHandler((notification: Notification) => {
      const text = Buffer.from(notification.data).toString();
      if (!text.startsWith('pin:')) return false;
      pins.push(`${notification.sender} ${text}`);
      return true;
    });
    const removeOther = router.addHandler(async (notification: Notification) => {
      others.push(Buffer.from(notification.data).toString());
      return Promise.resolve(true);
    });
    router.start(receiver);
    router.start(receiver);
    sender.sendNotification(peer, 'pin:1');
    sender.sendNotification(peer, 'other:1');
    await vi.waitFor(() => expect(others).toEqual(['other:1']), { timeout: 20_000, interval: 5 });
    removeOther();
    sender.sendNotification(peer, 'other:2');
    sender.sendNotification(peer, 'pin:2');
    await vi.waitFor(() => expect(pins).toEqual([`${sender.name} pin:1`, `${sender.name} pin:2`]), {
      timeout: 20_000,
      interval: 5,
    });
    expect(router.unclaimedNotifications).toBe(1);
    await receiver.close();
    await router.stopped();
  });

  it('goes on past a handler that throws or rejects: counted, told, and what it failed on passed to no other handler', async () => {
    const receiver = await transport.createAgent({
      name: `router-failing-receiver-${process.pid}`,
      backend: 'loopback',
    });
    // Its heartbeat runs only the rounds asked for below: it reports nothing else.
    receiver.faults.runHeartbeatRounds(0);
    const senderName = `router-failing-sender-${process.pid}`;
    const sender = await transport.createAgent({ name: senderName, backend: 'loopback' });
    agents.push(receiver);
    const text = (notification: Notification) => Buffer.from(notification.data).toString();
    const failures: string[] = [];
    const router = new NotificationRouter({
      onHandlerFailure: (error, failedOn) =>
        failures.push(`${(error as Error).message} on ${'data' in failedOn ? text(failedOn) : failedOn.cause}`),
    });
    const taken: string[] = [];
    const passedOn: string[] = [];
    router.addHandler((notification) => {
      if (text(notification) === 'throws') throw new Error('thrown');
      if (text(notification) === 'rejects') return Promise.reject(new Error('rejected'));
      taken.push(text(notification));
      return true;
    });
    router.addHandler((notification) => passedOn.push(text(notification)) > 0);
    const causes: string[] = [];
    router.addPeerEventHandler((event) => {
      if (event.cause === 'disconnected') throw new Error('thrown');
    });
    router.addPeerEventHandler((event) => causes.push(event.cause));
    router.start(receiver);
    const toReceiver = sender.loadPeer(receiver.metadata());
    for (const message of ['throws', 'rejects', 'kept']) sender.sendNotification(toReceiver, message);
    await vi.waitFor(() => expect(taken).toEqual(['kept']), { timeout: 20_000, interval: 5 });

    receiver.loadPeer(sender.metadata()).watch();
    await sender.close();
    // The first round's probe finds the sender gone and fails the connection; the second reports it.
    receiver.faults.runHeartbeatRounds(2);
    await vi.waitFor(() => expect(causes).toEqual(['disconnected']), { timeout: 20_000, interval: 5 });
    const reloaded = await transport.createAgent({ name: senderName, backend: 'loopback' });
    agents.push(reloaded);
    receiver.loadPeer(reloaded.metadata());
    await vi.waitFor(() => expect(causes).toEqual(['disconnected', 'reloaded']), { timeout: 20_000, interval: 5 });

    expect(failures).toEqual(['thrown on throws', 'rejected on rejects', 'thrown on disconnected']);
    expect(passedOn).toEqual([]);
    expect(router.handlerFailures).toBe(3);
    expect(router.unclaimedNotifications).toBe(0);
  });

  it('refuses a handler or a failure listener that is no function, adding nothing', async () => {
    expect(() => new NotificationRouter({ onHandlerFailure: 'log' as never })).toThrow(
      new EndpointOptionError('onHandlerFailure', 'log', 'a function (error, failedOn) => void'),
    );
    const router = new NotificationRouter();
    expect(() => router.addHandler(undefined as never)).toThrow(
      new EndpointOptionError('handler', undefined, 'a function (notification) => boolean | Promise<boolean>'),
    );
    expect(() => router.addPeerEventHandler({} as never)).toThrow(
      new EndpointOptionError('handler', {}, 'a function (event) => void'),
    );
    // Nothing was added: a notification goes unclaimed, and no handler failed on it.
    expect(await router.dispatch({ sender: 'a', data: Buffer.from([1]) })).toBe(false);
    expect([router.unclaimedNotifications, router.handlerFailures]).toEqual([1, 0]);
  });
});
