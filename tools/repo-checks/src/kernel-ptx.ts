// The committed PTX of the native library's kernels against their sources: native/kernels/generate.mjs
// --check says what is stale (a source changed, added or removed since the PTX was made; or, where the
// nvcc that made it is installed, PTX that differs from what it makes). The generator holds the rules,
// so that it and this check never disagree.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

export const kernelGenerator = 'native/kernels/generate.mjs';

/** What is stale, one sentence each; empty when the PTX is fresh. `root` holds native/ (the repository). */
export function checkKernelPtx(root: string): string[] {
  const run = spawnSync(process.execPath, [join(root, kernelGenerator), '--check'], { encoding: 'utf8' });
  if (run.error !== undefined) throw run.error;
  const lines = run.stdout.split('\n').filter((line) => line !== '');
  if (run.status !== 0 && lines.length === 0) throw new Error(`${kernelGenerator} --check failed: ${run.stderr}`);
  return lines;
}
