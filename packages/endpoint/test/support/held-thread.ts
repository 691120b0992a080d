import type { Agent } from '@kvreuse/native-bindings';

/**
 * Holds the JavaScript thread, synchronously, until a notification waits in `agent`'s library (at most 10 s): no
 * wake-up is read meanwhile, as when a long synchronous call holds the thread past a deadline.
 */
export function holdUntilNotificationWaits(agent: Pick<Agent, 'counters'>): void {
  const givenUpAt = performance.now() + 10_000;
  while (agent.counters().pendingNotifications === 0 && performance.now() < givenUpAt);
}
