import { kvreuseProject } from '../../vitest.shared.mjs';

export default kvreuseProject('fuzz', {
  testTimeout: 600_000,
  // The targets only compute: two forks keep both cores busy while the project beside it in the suite
  // (two run at a time) waits on its processes.
  maxWorkers: 2,
});
