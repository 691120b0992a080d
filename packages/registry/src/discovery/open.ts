import type { Settings } from '@kvreuse/config';
import { DiscoverySettingsError } from '../errors.js';
import { connectEtcdDiscovery } from './etcd.js';
import { MemoryDiscoveryStore } from './memory.js';
import { openSqliteDiscovery } from './sqlite.js';
import type { EtcdTlsFiles, EtcdUser } from './etcd-security.js';
import type { DiscoveryStore } from './types.js';

/**
 * The `discovery.*` settings that choose and locate a store, and what it presents to a secured etcd
 * (a resolved `Settings['discovery']` fits; an absent or empty file setting means none).
 */
export type DiscoverySettings = Pick<Settings['discovery'], 'backend' | 'sqlitePath' | 'etcdEndpoints'> &
  Partial<Pick<Settings['discovery'], 'etcdCaFile' | 'etcdCertFile' | 'etcdKeyFile' | 'etcdUsername' | 'etcdPasswordFile'>>;

/**
 * Opens the discovery store the settings name: `memory` (this process only), `sqlite` at
 * `sqlitePath` (relative to the working directory), or `etcd` at `etcdEndpoints`, over TLS with the
 * certificate files and as the user the `etcd*File` and `etcdUsername` settings name. The lease TTL
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
      return connectEtcdDiscovery({ hosts: settings.etcdEndpoints, ...etcdSecurity(settings) });
    default:
      throw new DiscoverySettingsError('discovery.backend', backend, "must be 'memory', 'sqlite' or 'etcd'");
  }
}

/** The TLS files and user of the etcd settings; an empty setting is none. */
function etcdSecurity(settings: DiscoverySettings): { tls?: EtcdTlsFiles; auth?: EtcdUser } {
  const given = (file: string | undefined) => (file === undefined || file === '' ? undefined : file);
  const caFile = given(settings.etcdCaFile);
  const certFile = given(settings.etcdCertFile);
  const keyFile = given(settings.etcdKeyFile);
  const username = given(settings.etcdUsername);
  const tls = caFile === undefined && certFile === undefined && keyFile === undefined ? undefined : { caFile, certFile, keyFile };
  return {
    ...(tls === undefined ? {} : { tls }),
    ...(username === undefined ? {} : { auth: { username, passwordFile: settings.etcdPasswordFile ?? '' } }),
  };
}
