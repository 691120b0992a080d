import { describe, expect, it } from 'vitest';
import { ucxTestsRun } from './support/backends.js';
import { provePrefixPull } from './support/prefix-proof.js';

describe.runIf(ucxTestsRun)('two processes on ucx', () => {
  it('B reads A’s 42-block Qwen3-0.6B prefix as 2,352 × 128 KiB descriptors, with every guard holding', async () => {
    const path = await provePrefixPull('proof');
    // Between two processes of one machine, UCX's shared-memory lanes, not tcp.
    expect(path).toMatch(/(sysv|posix)\/memory/);
  }, 120_000);
});
