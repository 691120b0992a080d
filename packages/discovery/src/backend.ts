/** The kind of store behind a `DiscoveryStore`. */
export type DiscoveryBackend = 'memory' | 'sqlite' | 'etcd';
