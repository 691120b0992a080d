import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, test, vi } from 'vitest';
import { ManualClock } from '@kvreuse-internal/test-support';
import { changeLog, recordWatch } from '../test/watch-recorder.js';
import { DiscoveryUnavailableError } from './errors.js';
import { openSqliteDiscovery } from './sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'kvreuse-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('sqlite discovery', () => {
  test('resolves its path to an absolute one, reports it, and names it when the file cannot be opened', async () => {
    const absolute = join(dir, 'relative.db');
    const store = openSqliteDiscovery(relative(process.cwd(), absolute));
    expect(store.path).toBe(absolute);
    await store.close();
    const missing = join(dir, 'no-such-dir', 'discovery.db');
    const error = (() => {
      try {
        openSqliteDiscovery(relative(process.cwd(), missing));
      } catch (thrown) {
        return thrown;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(DiscoveryUnavailableError);
    expect(error).toMatchObject({ code: 'DISCOVERY_UNAVAILABLE', location: missing, operation: 'open' });
    expect((error as Error).message).toContain(`sqlite discovery at ${missing}: open failed`);
    expect(() => openSqliteDiscovery('')).toThrow(
      expect.objectContaining({ code: 'DISCOVERY_INVALID_ARGUMENT', argument: 'path' }),
    );
  });

  test('a wall-clock step expires no lease and keeps no dead one alive: deadlines are on the monotonic clock', async () => {
    const store = openSqliteDiscovery(join(dir, 'clock-step.db'));
    const lease = await store.grantLease(60_000);
    await store.put('/leased', 'v', { lease: lease.id });
    const wall = Date.now();
    const now = vi.spyOn(Date, 'now');
    try {
      // The wall clock jumps an hour ahead (NTP, an administrator): the lease is as alive as before.
      now.mockReturnValue(wall + 3_600_000);
      await store.keepAlive(lease.id);
      expect(await store.get('/leased')).toBeDefined();
      // And back a day: a short lease still lapses on time (its deletion observed, not timed).
      now.mockReturnValue(wall - 86_400_000);
      const recorder = await recordWatch(store, '/short');
      const short = await store.grantLease(50);
      await store.put('/short', 'v', { lease: short.id });
      await recorder.until('the delete on expiry', (notices) => changeLog(notices).includes('delete /short'));
      expect(await store.get('/leased')).toBeDefined();
    } finally {
      now.mockRestore();
      await store.close();
    }
  });

  test('processes sharing the file share the lease clock: a lease granted by one expires for all at its deadline', async () => {
    const clock = new ManualClock();
    const path = join(dir, 'shared-clock.db');
    const owner = openSqliteDiscovery(path, { now: clock.now, clockId: 'manual' });
    const reader = openSqliteDiscovery(path, { now: clock.now, clockId: 'manual' });
    const lease = await owner.grantLease(1_000);
    await owner.put('/leased', 'v', { lease: lease.id });
    clock.advance(999);
    expect(await reader.get('/leased')).toBeDefined();
    clock.advance(1);
    expect(await reader.get('/leased')).toBeUndefined();
    await owner.close();
    await reader.close();
  });

  test('opened under another clock (a reboot restarts the monotonic clock), it drops the leases recorded under the old one', async () => {
    const path = join(dir, 'reboot.db');
    const before = openSqliteDiscovery(path, { now: () => 5_000_000, clockId: 'boot-a' });
    const lease = await before.grantLease(60_000);
    await before.put('/leased', 'v', { lease: lease.id });
    await before.put('/kept', 'no lease');
    await before.close();
    const after = openSqliteDiscovery(path, { now: () => 10, clockId: 'boot-b' });
    expect(after.clockId).toBe('boot-b');
    expect(await after.get('/leased')).toBeUndefined();
    expect(await after.get('/kept')).toBeDefined();
    await expect(after.keepAlive(lease.id)).rejects.toMatchObject({ code: 'DISCOVERY_LEASE_NOT_FOUND' });
    // Reopened under the same clock, live leases stay.
    const again = await after.grantLease(60_000);
    await after.put('/leased', 'v', { lease: again.id });
    await after.close();
    const same = openSqliteDiscovery(path, { now: () => 20, clockId: 'boot-b' });
    expect(await same.get('/leased')).toBeDefined();
    await same.close();
  });
});
