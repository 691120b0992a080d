import { kvreuseProject } from '../../vitest.shared.mjs';

// Native tests create UCX contexts and move real memory on a shared machine: give each test room
// (a hang still fails it), without asserting anything about speed.
export default kvreuseProject('native-bindings', {
  testTimeout: 30_000,
  // The bench's own helpers are tested beside it.
  include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'bench/**/*.test.ts'],
});
