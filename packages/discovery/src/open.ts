import type { discoveryGroup } from './settings.js';
import type { SettingsOf } from '@kvreuse/config';
import { DiscoveryArgumentError, DiscoveryCredentialsFileError, DiscoverySettingsError } from './errors.js';
import { connectEtcdDiscovery } from './etcd.js';
import { MemoryDiscoveryStore } from './memory.js';
import { openSqliteDiscovery } from './sqlite.js';
import type { EtcdTlsFiles, EtcdUser } from './etcd-security.js';
import type { DiscoveryStore } from './types.js';

/**
 * The `discovery.*` settings that choose and locate a store, and what it presents to a secured etcd
 * (a resolved `settings.discovery` fits; an absent or empty file setting means none).
 */
export type DiscoverySettings = Pick<
  SettingsOf<[typeof discoveryGroup]>['discovery'],
  'backend' | 'sqlitePath' | 'etcdEndpoints'
> &
  Partial<
    Pick<
      SettingsOf<[typeof discoveryGroup]>['discovery'],
      'sqliteFileMode' | 'etcdCaFile' | 'etcdCertFile' | 'etcdKeyFile' | 'etcdUsername' | 'etcdPasswordFile'
    >
  >;

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
      return openSqliteDiscovery(settings.sqlitePath, sqliteFileMode(settings.sqliteFileMode));
    case 'etcd':
      return namingSettings(() => connectEtcdDiscovery({ hosts: settings.etcdEndpoints, ...etcdSecurity(settings) }));
    default:
      throw new DiscoverySettingsError('discovery.backend', backend, "must be 'memory', 'sqlite' or 'etcd'");
  }
}

/** The file mode the octal `discovery.sqlite_file_mode` names (absent: the store's default, 0600). */
function sqliteFileMode(mode: string | undefined): { fileMode?: number } {
  if (mode === undefined) return {};
  if (!/^0?[67][0-7]{2}$/.test(mode)) {
    throw new DiscoverySettingsError(
      'discovery.sqlite_file_mode',
      mode,
      'octal permission bits that let the owner read and write, such as 0600',
    );
  }
  return { fileMode: Number.parseInt(mode, 8) };
}

/** The setting each etcd store option comes from. */
const etcdSettingOf: Readonly<Record<string, string>> = {
  hosts: 'discovery.etcd_endpoints',
  'tls.caFile': 'discovery.etcd_ca_file',
  'tls.certFile': 'discovery.etcd_cert_file',
  'tls.keyFile': 'discovery.etcd_key_file',
  'auth.username': 'discovery.etcd_username',
  'auth.passwordFile': 'discovery.etcd_password_file',
};

/** Runs `open`, its refusals of a store option naming the setting that option came from instead. */
function namingSettings<T>(open: () => T): T {
  try {
    return open();
  } catch (error) {
    if (error instanceof DiscoveryCredentialsFileError && etcdSettingOf[error.option] !== undefined) {
      throw new DiscoveryCredentialsFileError(error.backend, etcdSettingOf[error.option]!, error.path, error.reason, {
        cause: error,
      });
    }
    if (error instanceof DiscoveryArgumentError && etcdSettingOf[error.argument] !== undefined) {
      throw new DiscoverySettingsError(etcdSettingOf[error.argument]!, error.value, error.reason, { cause: error });
    }
    throw error;
  }
}

/** The TLS files and user of the etcd settings; an empty setting is none. */
function etcdSecurity(settings: DiscoverySettings): { tls?: EtcdTlsFiles; auth?: EtcdUser } {
  const given = (file: string | undefined) => (file === undefined || file === '' ? undefined : file);
  const caFile = given(settings.etcdCaFile);
  const certFile = given(settings.etcdCertFile);
  const keyFile = given(settings.etcdKeyFile);
  const username = given(settings.etcdUsername);
  const tls =
    caFile === undefined && certFile === undefined && keyFile === undefined ? undefined : { caFile, certFile, keyFile };
  return {
    ...(tls === undefined ? {} : { tls }),
    ...(username === undefined ? {} : { auth: { username, passwordFile: settings.etcdPasswordFile ?? '' } }),
  };
}
