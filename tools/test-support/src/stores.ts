import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from './clock.js';

/** A discovery store as far as these backends need it: one that closes. */
export interface ClosingStore {
  close(): Promise<void>;
}

export interface StoreUnderTest<Store extends ClosingStore> {
  readonly store: Store;
  /** The clock the store's leases expire by: they expire only when the test advances it. */
  readonly clock: ManualClock;
  dispose(): Promise<void>;
}

/**
 * The two local drivers of @kvreuse/discovery, handed in by the tests that use them: this package stands
 * below discovery (whose own tests use it), so it does not import discovery itself.
 */
export interface LocalDiscoveryDrivers<Store extends ClosingStore> {
  readonly MemoryDiscoveryStore: new (options: { now: () => number }) => Store;
  openSqliteDiscovery(path: string, options: { pollIntervalMs: number; now: () => number; clockId: string }): Store;
}

export interface LocalBackend<Store extends ClosingStore> {
  readonly name: 'memory' | 'sqlite';
  open(): StoreUnderTest<Store>;
}

/** The real discovery backends that readiness tests run against (one process: memory and a SQLite file), on a manual clock. */
export function localBackends<Store extends ClosingStore>(
  drivers: LocalDiscoveryDrivers<Store>,
): readonly LocalBackend<Store>[] {
  return [
    {
      name: 'memory',
      open() {
        const clock = new ManualClock();
        const store = new drivers.MemoryDiscoveryStore({ now: clock.now });
        return { store, clock, dispose: () => store.close() };
      },
    },
    {
      name: 'sqlite',
      open() {
        const clock = new ManualClock();
        const dir = mkdtempSync(join(tmpdir(), 'kvreuse-readiness-'));
        const store = drivers.openSqliteDiscovery(join(dir, 'discovery.sqlite'), {
          pollIntervalMs: 5,
          now: clock.now,
          clockId: 'manual',
        });
        return {
          store,
          clock,
          async dispose() {
            await store.close();
            rmSync(dir, { recursive: true, force: true });
          },
        };
      },
    },
  ];
}
