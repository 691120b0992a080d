// One etcd server and one store on it for a test file of this package.
import { EtcdServer, etcdRuns } from '@kvreuse-internal/test-support';
import { afterAll, beforeAll } from 'vitest';
import { connectEtcdDiscovery, type EtcdDiscoveryOptions, type EtcdDiscoveryStore } from '../src/index.js';

export interface EtcdFixture {
  readonly server: EtcdServer;
  readonly store: EtcdDiscoveryStore;
}

/**
 * Starts one etcd server and one store for the calling test file (before all its tests, when
 * `etcdRuns`) and stops them after all. Read `server` and `store` inside tests.
 */
export function useEtcdStore(
  options: Omit<EtcdDiscoveryOptions, 'hosts'> = { requestTimeoutMs: 2_000, maxReconnectDelayMs: 500 },
): EtcdFixture {
  let server: EtcdServer | undefined;
  let store: EtcdDiscoveryStore | undefined;
  beforeAll(async () => {
    if (!etcdRuns) return;
    server = await EtcdServer.start();
    store = connectEtcdDiscovery({ ...options, hosts: server.url });
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    await server?.stop();
  });
  return {
    get server() {
      if (server === undefined) throw new Error('etcd is not running (etcdRuns is false, or startup failed)');
      return server;
    },
    get store() {
      if (store === undefined) throw new Error('etcd is not running (etcdRuns is false, or startup failed)');
      return store;
    },
  };
}
