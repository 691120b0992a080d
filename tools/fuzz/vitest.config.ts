import { kvreuseProject } from '../../vitest.shared.mjs';

export default kvreuseProject('fuzz', {
  testTimeout: 600_000,
  // The targets only compute, and the suite runs one project at a time: one fork per core.
  maxWorkers: 2,
});
