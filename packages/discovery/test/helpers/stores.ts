import { localBackends as localBackendsOf, type StoreUnderTest as StoreOf } from '@kvreuse-internal/test-support';
import { type DiscoveryStore, MemoryDiscoveryStore, openSqliteDiscovery } from '../../src/index.js';

export type StoreUnderTest = StoreOf<DiscoveryStore>;

/** The real discovery backends that readiness tests run against (one process: memory and a SQLite file), on a manual clock. */
export const localBackends = localBackendsOf<DiscoveryStore>({ MemoryDiscoveryStore, openSqliteDiscovery });
