import { describe, expect, it } from 'vitest';
import { deferred } from './deferred.js';
import { nextTurn } from '../test/support/next-turn.js';
import { queuePeerLoad } from './peer-loads.js';

describe('queuePeerLoad', () => {
  it('runs the loads of one agent one after another, a failed one not stopping the next; another agent does not wait', async () => {
    const agent = {};
    const other = {};
    const first = deferred<string>();
    const second = deferred<string>();
    const ran: string[] = [];
    const failing = queuePeerLoad(agent, async () => {
      ran.push('first');
      await first.promise;
      throw new Error('refused');
    });
    const next = queuePeerLoad(agent, () => {
      ran.push('second');
      return second.promise;
    });
    const elsewhere = queuePeerLoad(other, async () => {
      ran.push('other agent');
      return 'loaded';
    });
    await nextTurn();
    expect(ran).toEqual(['first', 'other agent']);
    await expect(elsewhere).resolves.toBe('loaded');

    first.resolve('');
    await expect(failing).rejects.toThrow('refused');
    await nextTurn();
    expect(ran).toEqual(['first', 'other agent', 'second']);
    second.resolve('peer');
    await expect(next).resolves.toBe('peer');
  });
});
