import { kvreuseProject } from '../../vitest.shared.mjs';

export default kvreuseProject('test-support');
