import { kvreuseProject } from '../../vitest.shared.mjs';

export default kvreuseProject('fuzz', { testTimeout: 600_000 });
