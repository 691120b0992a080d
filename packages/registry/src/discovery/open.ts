import type { Settings } from '@kvreuse/config';
import { DiscoverySettingsError } from '../errors.js';
import { connectEtcdDiscovery } from './etcd.js';
import { MemoryDiscoveryStore } from './memory.js';
import { openSqliteDiscovery } from './sqlite.js';
import type { DiscoveryStore } from './types.js';

/** The `discovery.*` settings that choose and locate a store (a resolved `Settings['discovery']` fits). */
export type DiscoverySettings = Pick<Settings['discovery'], 'backend' | 'sqlitePath' | 'etcdEndpoints'>;

/**
 * Opens the discovery store the settings name: `memory` (this process only), `sqlite` at
 * `sqlitePath` (relative to the working directory), or `etcd` at `etcdEndpoints`. The lease TTL
 * (`discovery.leaseTtlMs`) is the publisher's to use; this only opens the store.
 */
export function openDiscovery(settings: DiscoverySettings): DiscoveryStore {
  const backend: unknown = settings?.backend;
  switch (backend) {
    case 'memory':
      return new MemoryDiscoveryStore();
    case 'sqlite':
      return openSqliteDiscovery(settings.sqlitePath);
    case 'etcd':
      return connectEtcdDiscovery({ hosts: settings.etcdEndpoints });
    default:
      throw new DiscoverySettingsError('discovery.backend', backend, "must be 'memory', 'sqlite' or 'etcd'");
  }
}
