// The notification router on two real loopback agents: one consumer, handlers asked in order.
import { type Agent, loadTransport, type Notification } from '@kvreuse/native-bindings';
import { afterEach, describe, expect, it, vi } from 'vitest';
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
});
