import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import type * as Cockatiel from 'cockatiel';
import type * as Etcd3Module from 'etcd3';
import type { DiscoveryBackend } from './backend.js';
import { DiscoveryDriverMissingError } from './errors.js';

// The drivers of the SQLite and etcd stores are optional peer dependencies, loaded when the first store
// of that backend is made: a process that reads readiness and inventory from a store it is handed (a
// router) installs neither, and etcd3 loads gRPC and compiles etcd's protocol definitions (about 0.3 s
// of CPU), which a process that never connects to etcd (one on SQLite, a CLI asked for its help) should
// not pay for.
const require = createRequire(import.meta.url);

/** `require(name)`, or a `DiscoveryDriverMissingError` naming the package to install when it is not installed. */
export function loadDriver<T>(backend: DiscoveryBackend, name: string): T {
  try {
    return require(name) as T;
  } catch (error) {
    const missing =
      (error as { code?: unknown }).code === 'MODULE_NOT_FOUND' &&
      String((error as Error).message).includes(`'${name}'`);
    if (missing) throw new DiscoveryDriverMissingError(backend, name, { cause: error });
    throw error;
  }
}

/** The better-sqlite3 driver. */
export const betterSqlite3 = (): typeof BetterSqlite3 => loadDriver<typeof BetterSqlite3>('sqlite', 'better-sqlite3');

/** The etcd3 client library. */
export const etcd3 = (): typeof Etcd3Module => loadDriver<typeof Etcd3Module>('etcd', 'etcd3');

/** cockatiel's policy that does nothing: the etcd3 client's own retries and circuit breaker, turned off. */
export const noRetries = (): typeof Cockatiel.noop => (require('cockatiel') as typeof Cockatiel).noop;
