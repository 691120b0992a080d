import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DiscoveryStore, MemoryDiscoveryStore, openSqliteDiscovery } from '../../src/index.js';
import { ManualClock } from './clock.js';

export interface StoreUnderTest {
  readonly store: DiscoveryStore;
  /** The clock the store's leases expire by: they expire only when the test advances it. */
  readonly clock: ManualClock;
  dispose(): Promise<void>;
}

/** The real discovery backends that readiness tests run against (one process: memory and a SQLite file), on a manual clock. */
export const localBackends: readonly { readonly name: 'memory' | 'sqlite'; open(): StoreUnderTest }[] = [
  {
    name: 'memory',
    open() {
      const clock = new ManualClock();
      const store = new MemoryDiscoveryStore({ now: clock.now });
      return { store, clock, dispose: () => store.close() };
    },
  },
  {
    name: 'sqlite',
    open() {
      const clock = new ManualClock();
      const dir = mkdtempSync(join(tmpdir(), 'kvreuse-readiness-'));
      const store = openSqliteDiscovery(join(dir, 'discovery.sqlite'), { pollIntervalMs: 5, now: clock.now, clockId: 'manual' });
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
