import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DiscoveryStore, MemoryDiscoveryStore, openSqliteDiscovery } from '../../src/index.js';

export interface StoreUnderTest {
  readonly store: DiscoveryStore;
  dispose(): Promise<void>;
}

/** The real discovery backends that readiness tests run against (one process: memory and a SQLite file). */
export const localBackends: readonly { readonly name: 'memory' | 'sqlite'; open(): StoreUnderTest }[] = [
  {
    name: 'memory',
    open() {
      const store = new MemoryDiscoveryStore();
      return { store, dispose: () => store.close() };
    },
  },
  {
    name: 'sqlite',
    open() {
      const dir = mkdtempSync(join(tmpdir(), 'kvreuse-readiness-'));
      const store = openSqliteDiscovery(join(dir, 'discovery.sqlite'), { pollIntervalMs: 5 });
      return {
        store,
        async dispose() {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
];
