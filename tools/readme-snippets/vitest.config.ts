import { kvreuseProject } from '../../vitest.shared.mjs';

// Each snippet program is a process of its own; two at a time, one per core of the shared test machine.
export default kvreuseProject('readme-snippets', { maxConcurrency: 2 });
