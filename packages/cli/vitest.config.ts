import { kvreuseProject } from '../../vitest.shared.mjs';

export default kvreuseProject('cli', {
  // Most of its test time is spent waiting on the processes it starts (the binary, rank processes,
  // etcd): two files at a time. Every file has its own temporary directories, SQLite files, etcd and
  // ports, so none sees another's.
  maxWorkers: 2,
});
