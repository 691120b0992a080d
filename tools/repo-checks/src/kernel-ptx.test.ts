import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { checkKernelPtx } from './kernel-ptx.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const header = 'native/src/services/cuda_kernels_ptx.h';
/** Where nvcc is installed, the check also regenerates the PTX (CUDA's usual place, or NVCC). */
const nvccHere = existsSync(process.env['NVCC'] ?? '/usr/local/cuda/bin/nvcc');

describe('the repository', () => {
  it("embeds PTX made from the kernels' current sources", () => {
    expect(checkKernelPtx(repoRoot)).toEqual([]);
  });
});

describe('checkKernelPtx', () => {
  const copies: string[] = [];
  afterEach(() => {
    for (const copy of copies.splice(0)) rmSync(copy, { recursive: true, force: true });
  });

  /** A copy of the kernels, their generator and the header, where a test may change them. */
  function copyOfTheKernels(): string {
    const root = mkdtempSync(join(tmpdir(), 'kernel-ptx-'));
    copies.push(root);
    cpSync(join(repoRoot, 'native/kernels'), join(root, 'native/kernels'), { recursive: true });
    cpSync(join(repoRoot, header), join(root, header));
    return root;
  }

  it('names a kernel whose source changed since its PTX was made, and how to regenerate', () => {
    const root = copyOfTheKernels();
    writeFileSync(join(root, 'native/kernels/gather.cu'), `${readFileSync(join(root, 'native/kernels/gather.cu'))}\n`);
    expect(checkKernelPtx(root)).toEqual([
      `${header} was made from an older native/kernels/gather.cu`,
      'regenerate it: node native/kernels/generate.mjs (needs nvcc)',
    ]);
  });

  it('names a header the kernels include that changed since their PTX was made', () => {
    const root = copyOfTheKernels();
    const included = join(root, 'native/kernels/route_tiles.cuh');
    writeFileSync(included, `${readFileSync(included)}\n`);
    expect(checkKernelPtx(root)).toEqual([
      `${header} was made from an older native/kernels/route_tiles.cuh`,
      'regenerate it: node native/kernels/generate.mjs (needs nvcc)',
    ]);
  });

  it('names a kernel added without PTX, and PTX of a kernel removed', () => {
    const root = copyOfTheKernels();
    writeFileSync(join(root, 'native/kernels/extra.cu'), 'extern "C" __global__ void kvt_extra() {}\n');
    rmSync(join(root, 'native/kernels/checksum.cu'));
    expect(checkKernelPtx(root)).toEqual([
      `${header} was made without native/kernels/extra.cu`,
      `${header} was made with native/kernels/checksum.cu, which is gone`,
      'regenerate it: node native/kernels/generate.mjs (needs nvcc)',
    ]);
  });

  it.runIf(nvccHere)('names PTX that differs from what the same nvcc makes of the same sources', () => {
    const root = copyOfTheKernels();
    const text = readFileSync(join(root, header), 'utf8');
    writeFileSync(join(root, header), text.replace('.entry kvt_gather(', '.entry kvt_gather_edited('));
    expect(checkKernelPtx(root)).toEqual([
      expect.stringMatching(
        new RegExp(`^${header} differs from what Cuda compilation tools.* makes of the same sources$`),
      ),
      'regenerate it: node native/kernels/generate.mjs (needs nvcc)',
    ]);
  });
});
