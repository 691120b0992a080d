// The vram kind through the facade, over the fake CUDA driver of native/test/fake_cuda (host memory behind
// the driver's entry points, built here with make): a child process names it in KVT_CUDA_LIBRARY before
// the library first loads a driver. It tests the layer above the driver, never a GPU (tools/gpu-check).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { spawnScript } from './support/child.js';

const nativeDir = fileURLToPath(new URL('../../../native', import.meta.url));

describe('vram over the fake CUDA driver', () => {
  it('allocates, registers, fills from the host and frees vram, refuses what is not device memory of the named GPU, and pulls by template between vram banks with checksums on the GPU', async () => {
    execFileSync('make', ['-s', '-C', nativeDir, 'build/fake_cuda/libcuda.so.1'], { stdio: 'inherit' });
    const child = spawnScript('test/fake-cuda/probe.ts', {
      env: { KVT_CUDA_LIBRARY: `${nativeDir}/build/fake_cuda/libcuda.so.1`, FAKE_CUDA_DEVICES: '2' },
    });
    const report = await child.next<Record<string, unknown>>('report');
    expect(await child.exited).toBe(0);
    expect(report).toEqual({
      event: 'report',
      vram: { supported: true },
      allocation: { kind: 'vram', device: 1 },
      region: { kind: 'vram', device: 1, bytes: 1 << 20 },
      view: { code: 'INVALID_ARGUMENT' },
      hostAsVram: { code: 'INVALID_PARAM', detail: expect.stringContaining('host memory named as vram') },
      otherGpu: { code: 'INVALID_PARAM', detail: expect.stringContaining('memory of GPU 1, not of GPU 0') },
      noSuchGpu: { code: 'INVALID_PARAM', detail: expect.stringContaining('no GPU 999') },
      writePastEnd: { code: 'INVALID_ARGUMENT' },
      templatePull: {
        bytes: expect.any(Number),
        planned: expect.any(Number),
        checksumsAgree: true,
        contentArrived: true,
      },
    });
    const pull = report['templatePull'] as { bytes: number; planned: number };
    expect(pull.bytes).toBe(pull.planned);
    expect(pull.bytes).toBeGreaterThan(0);
  });
});
