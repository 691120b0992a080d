import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, runBinary } from './binary.js';

const outside = mkdtempSync(join(tmpdir(), 'kvreuse-cli-outside-'));
afterAll(() => rmSync(outside, { recursive: true, force: true }));

describe.each(['bench', 'demo'])('kvreuse %s outside a checkout', (command) => {
  it('says it runs from a checkout: one line, exit 1', async () => {
    const run = await runBinary([command], { cwd: outside });
    expect(run).toMatchObject({ status: 1, stdout: '' });
    expect(run.stderrLines).toEqual([
      `kvreuse: ${command} runs from a kvreuse repository checkout (git clone https://github.com/kvreuse/kvreuse, then npm run ${command}); ${outside} is not inside one [NOT_A_CHECKOUT]`,
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
    expect(run.stdout).toBe(`in ${repoRoot}: ${process.execPath} ${join(repoRoot, 'scripts/dev.mjs')} bench --write-docs\n`);
  });
});

describe('kvreuse demo in a checkout', () => {
  it('runs the main job with the setting flags given, exit 0', async () => {
    const run = await runBinary(['demo', '--router-minimum-transfer-prefix-blocks', '8'], { cwd: repoRoot });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^router\.minimum_transfer_prefix_blocks +8 +argv --router-minimum-transfer-prefix-blocks$/m);
    expect(run.stdout).toContain('== plan: pull blocks 0..41 (42 blocks)');
    expect(run.stdout).toContain('308,281,344 bytes');
  });

  it('an unknown setting flag is refused before the main job starts: one line, exit 2', async () => {
    const run = await runBinary(['demo', '--router-nope', '1'], { cwd: repoRoot });
    expect(run).toMatchObject({ status: 2, stdout: '' });
    expect(run.stderrLines).toEqual([expect.stringMatching(/^kvreuse: 1 unknown setting name\(s\): --router-nope in argv .*\[UNKNOWN_SETTING\]$/)]);
  });
});
