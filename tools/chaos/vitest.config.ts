import { kvreuseProject } from '../../vitest.shared.mjs';

// A run starts real rank processes and etcd, pulls and injects a fault: a minute is a hang guard, not a speed check.
export default kvreuseProject('chaos', { testTimeout: 120_000 });
