import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, runBinary } from './binary.js';

const outside = mkdtempSync(join(tmpdir(), 'kvreuse-cli-outside-'));
afterAll(() => rmSync(outside, { recursive: true, force: true }));

describe('kvreuse bench outside a checkout', () => {
  it('says it runs from a checkout and what measures a link from the installed package: one line, exit 1', async () => {
    const run = await runBinary(['bench'], { cwd: outside });
    expect(run).toMatchObject({ status: 1, stdout: '' });
    expect(run.stderrLines).toEqual([
      `kvreuse: bench runs from a kvreuse repository checkout (git clone https://github.com/kvreuse/kvreuse, then npm run bench); ${outside} is not inside one. ` +
        'From the installed package, kvreuse bench link measures the link between two hosts over UCX (see kvreuse bench link --help) [NOT_A_CHECKOUT]',
    ]);
  });
});

describe('kvreuse bench in a checkout', () => {
  it("--dry-run names the checkout's benchmark runner and runs nothing", async () => {
    const run = await runBinary(['bench', '--dry-run'], { cwd: join(repoRoot, 'packages') });
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(`in ${repoRoot}: ${process.execPath} ${join(repoRoot, 'scripts/dev.mjs')} bench\n`);
  });

  it('--write-docs is passed on to the merge of the figures', async () => {
    const run = await runBinary(['bench', '--write-docs', '--dry-run'], { cwd: repoRoot });
    expect(run.stdout).toBe(
      `in ${repoRoot}: ${process.execPath} ${join(repoRoot, 'scripts/dev.mjs')} bench --write-docs\n`,
    );
  });
});
