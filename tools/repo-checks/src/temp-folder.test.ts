// vitest.temp-folder.mjs, the suite's check that tests leave nothing in the temporary folder, run on a
// fixture project whose test leaves a folder or not: the run's own folder is removed either way, and
// a run that left something fails naming it.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const fixture = join(repoRoot, 'tools/repo-checks/fixtures/temp-folder');
const outer = mkdtempSync(join(tmpdir(), 'kvreuse-temp-folder-check-'));
afterAll(() => rmSync(outer, { recursive: true, force: true }));
/** What the check itself keeps in the folder around a run: tsx's compile cache, which it links into the run's. */
const tsxCache = `tsx-${process.geteuid?.() ?? ''}`;

/** The fixture run under TMPDIR `outer`, as a run of its own (not part of this one's). */
function runFixture(leave: boolean) {
  const { KVREUSE_TEST_TMPDIR: _ours, ...env } = process.env;
  return spawnSync(process.execPath, [join(repoRoot, 'node_modules/vitest/vitest.mjs'), 'run', '--root', fixture], {
    encoding: 'utf8',
    env: { ...env, CI: '', TMPDIR: outer, LEAVE: leave ? '1' : '0' },
  });
}

describe('the temporary-folder check', () => {
  it('a run that leaves nothing passes, and removes the folder it ran in', () => {
    const run = runFixture(false);
    expect(run.status).toBe(0);
    expect(readdirSync(outer)).toEqual([tsxCache]);
  }, 120_000);

  it('a run that leaves a folder fails with status 1 naming it, and removes it', () => {
    const run = runFixture(true);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/the tests left 1 entries in their temporary folder: kvreuse-demo-\w+\n/);
    expect(readdirSync(outer)).toEqual([tsxCache]);
  }, 120_000);
});
