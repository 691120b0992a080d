import { kvreuseProject } from '../../vitest.shared.mjs';

export default kvreuseProject('discovery', {
  // Most of its test time is spent waiting on the processes it starts (etcd, SQLite writers): two
  // files at a time. Every file has its own etcd on ports the system handed out, its own temporary
  // directories and SQLite files, so none sees another's.
  maxWorkers: 2,
});
