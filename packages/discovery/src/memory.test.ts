import { describe, expect, test, vi } from 'vitest';
import { ManualClock } from '@kvreuse-internal/test-support';
import { changeLog, recordWatch } from '../test/watch-recorder.js';
import { DiscoveryLeaseError } from './errors.js';
import { MemoryDiscoveryStore } from './memory.js';

describe('memory discovery leases', () => {
  test('expire by the injected clock: exactly when it reaches the deadline, never because time passed', async () => {
    const clock = new ManualClock();
    const store = new MemoryDiscoveryStore({ now: clock.now });
    const recorder = await recordWatch(store, '/');
    const lease = await store.grantLease(1_000);
    await store.put('/leased', 'v', { lease: lease.id });
    clock.advance(999);
    expect(await store.get('/leased')).toBeDefined();
    await store.keepAlive(lease.id);
    clock.advance(999);
    expect(await store.get('/leased')).toBeDefined();
    clock.advance(1);
    expect(await store.get('/leased')).toBeUndefined();
    await expect(store.keepAlive(lease.id)).rejects.toBeInstanceOf(DiscoveryLeaseError);
    await recorder.until('the delete', (notices) => changeLog(notices).length === 2);
    expect(changeLog(recorder.notices)).toEqual(['put /leased', 'delete /leased']);
    await store.close();
  });

  test('with the default monotonic clock, a lease nobody touches the store for still expires, and watchers see it', async () => {
    const store = new MemoryDiscoveryStore();
    const recorder = await recordWatch(store, '/');
    const lease = await store.grantLease(50);
    await store.put('/leased', 'v', { lease: lease.id });
    await recorder.until('the delete on expiry', (notices) => changeLog(notices).includes('delete /leased'));
    await store.close();
  });
  test('a lease longer than a timer can wait (2^31 ms, about 24.8 days) arms no timer that fires at once', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const clock = new ManualClock();
      const reads = vi.fn(clock.now);
      const store = new MemoryDiscoveryStore({ now: reads });
      const lease = await store.grantLease(30 * 24 * 3_600_000);
      reads.mockClear();
      // Node fires a longer timeout after 1 ms: the store swept and re-armed every millisecond.
      vi.advanceTimersByTime(1_000);
      expect(reads).not.toHaveBeenCalled();
      clock.advance(30 * 24 * 3_600_000);
      await expect(store.keepAlive(lease.id)).rejects.toBeInstanceOf(DiscoveryLeaseError);
      await store.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
