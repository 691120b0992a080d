import { createRequire } from 'node:module';
import type * as Cockatiel from 'cockatiel';
import type * as Etcd3Module from 'etcd3';

// The etcd3 client library and its fault-handling library are loaded when the first etcd store is
// made: etcd3 loads gRPC and compiles etcd's protocol definitions (about 0.3 s of CPU), which a
// process that never connects to etcd (one on SQLite, a CLI asked for its help) should not pay for.
const require = createRequire(import.meta.url);

/** The etcd3 client library. */
export const etcd3 = (): typeof Etcd3Module => require('etcd3') as typeof Etcd3Module;

/** cockatiel's policy that does nothing: the etcd3 client's own retries and circuit breaker, turned off. */
export const noRetries = (): typeof Cockatiel.noop => (require('cockatiel') as typeof Cockatiel).noop;
