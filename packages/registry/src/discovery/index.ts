export { entryText } from './common.js';
export { connectEtcdDiscovery, EtcdDiscoveryStore, type EtcdDiscoveryOptions } from './etcd.js';
export type { EtcdTlsFiles, EtcdUser } from './etcd-security.js';
export { MemoryDiscoveryStore, type MemoryDiscoveryOptions } from './memory.js';
export { openSqliteDiscovery, SqliteDiscoveryStore, type SqliteDiscoveryOptions } from './sqlite.js';
export type * from './types.js';
export { type DiscoverySettings, openDiscovery } from './open.js';
export { ClusterSecret, clusterSecretMinBytes, type ClusterSecretSettings, openClusterSecret } from './cluster-secret.js';
