// A pull between vram banks through the endpoints, over the fake CUDA driver of native/test/fake_cuda (host
// memory behind the driver's entry points, built here with make): a child process names it in
// KVT_CUDA_LIBRARY before the library first loads a driver. It tests the endpoint's plumbing above the
// driver (pins, templates between vram banks, checksums on the GPU's kernel), never a GPU (tools/gpu-check).
// The banks hold what the fake's fresh memory holds (zeros) on both sides: that the sums agree shows the
// plumbing ran, not the bytes (test_cuda checks the kernel's sums against the host's, and moved bytes).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startChild } from '../test/support/child-process.js';

const nativeDir = fileURLToPath(new URL('../../../native', import.meta.url));
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe('a pull between vram banks over the fake CUDA driver', () => {
  it('moves and verifies every block, summed on both sides by the checksum kernel', async () => {
    execFileSync('make', ['-s', '-C', nativeDir, 'build/fake_cuda/libcuda.so.1'], { stdio: 'inherit' });
    const child = startChild<{ event: 'receipt' } & Record<string, unknown>>(
      'test/fake-cuda/vram-pull.ts',
      [],
      cleanups,
      { KVT_CUDA_LIBRARY: `${nativeDir}/build/fake_cuda/libcuda.so.1`, FAKE_CUDA_DEVICES: '1' },
    );
    const blockBytes = 2 * 2 * 4 * 2 * 8 * 2;
    expect(await child.next('receipt')).toEqual({
      event: 'receipt',
      requested: 6,
      blocks: 6,
      bytes: 6 * blockBytes,
      bytesMoved: 6 * blockBytes,
      verify: 'full',
      checkedBlocks: 6,
      recomputed: { blocks: 0, fromBlock: 6, reasons: [] },
    });
  });
});
