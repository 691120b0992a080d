// scripts/test-totals.mjs (the closing line of `npm test`), checked against what vitest really
// writes: a fixture project whose files fail in every way short of a failing test.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countReport, readReports, testProjects, testTotals, totalsLine } from '../../../scripts/test-totals.mjs';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const fixture = join(repoRoot, 'tools/repo-checks/fixtures/test-report');

describe('a vitest report of files that fail without a failing test', () => {
  const resultsDir = mkdtempSync(join(tmpdir(), 'kvreuse-test-report-'));
  let exitStatus: number | null = null;
  beforeAll(() => {
    const vitest = join(repoRoot, 'node_modules/vitest/vitest.mjs');
    const outputFile = join(resultsDir, 'fixture.json');
    const run = spawnSync(
      process.execPath,
      [vitest, 'run', '--root', fixture, '--reporter=json', `--outputFile=${outputFile}`],
      {
        encoding: 'utf8',
        env: { ...process.env, CI: '' },
      },
    );
    exitStatus = run.status;
  }, 120_000);
  afterAll(() => rmSync(resultsDir, { recursive: true, force: true }));

  it('counts a file that does not load, one that does not parse and one whose hook fails as failures', () => {
    expect(exitStatus).toBe(1);
    const count = countReport(readReports(resultsDir).get('fixture')!);
    expect({ passed: count.passed, failed: count.failed, skipped: count.skipped }).toEqual({
      passed: 2,
      failed: 4,
      skipped: 1,
    });
    expect(count.failures.map((failure) => failure.replace(`${fixture}/`, ''))).toEqual([
      'mixed.test.mjs > fails: AssertionError: expected 1 to be 2 // Object.is equality',
    ]);
    expect(count.problems.map((problem) => problem.replace(`${fixture}/`, ''))).toEqual([
      expect.stringMatching(/^failing-hook\.test\.mjs failed outside its tests: afterAll failed/),
      expect.stringMatching(/^missing-import\.test\.mjs failed outside its tests: .*no-such-module\.mjs/),
      expect.stringMatching(/^syntax-error\.test\.mjs failed outside its tests: /),
    ]);
  });
});

describe('testTotals', () => {
  const passing = { numPassedTests: 3, numFailedTests: 0, numPendingTests: 1, testResults: [] };
  const failing = {
    numPassedTests: 1,
    numFailedTests: 2,
    numPendingTests: 0,
    testResults: [
      {
        name: '/repo/b/src/x.test.ts',
        status: 'failed',
        assertionResults: [
          {
            status: 'failed',
            fullName: 'x > times out',
            failureMessages: ['Error: Test timed out in 5000ms.\nIf this is a long-running test, …'],
          },
          { status: 'passed', fullName: 'x > passes' },
          {
            status: 'failed',
            fullName: 'x > compares',
            failureMessages: ['\x1b[31mAssertionError\x1b[39m: expected 1 to be 2'],
          },
        ],
      },
    ],
  };

  it('adds the reports and counts nothing more when every test task succeeded', () => {
    const reports = new Map([
      ['a', passing],
      ['b', failing],
    ]);
    const totals = testTotals(reports, [
      { project: 'a', exitCode: 0 },
      { project: 'b', exitCode: 1 },
    ]);
    expect(totalsLine(totals)).toBe('4 passed, 2 failed, 1 skipped');
    expect(totals.problems).toEqual([]);
    expect(totals.failures).toEqual([
      'b: /repo/b/src/x.test.ts > x > times out: Error: Test timed out in 5000ms.',
      'b: /repo/b/src/x.test.ts > x > compares: AssertionError: expected 1 to be 2',
    ]);
  });

  it('counts a test task that failed with a clean report, without a report, or was killed', () => {
    const reports = new Map([['crashed', passing]]);
    const totals = testTotals(reports, [
      { project: 'crashed', exitCode: 1 },
      { project: 'no-report', exitCode: 2 },
      { project: 'killed', exitCode: 'SIGKILL' },
    ]);
    expect(totalsLine(totals)).toBe('3 passed, 3 failed, 1 skipped');
    expect(totals.problems).toEqual([
      'crashed: its test task exited with 1 although no test failed (see its log)',
      'no-report: its test task exited with 2 and wrote no report',
      'killed: its test task exited with SIGKILL and wrote no report',
    ]);
  });

  it('finds the folder of every workspace package with a test script', () => {
    expect(testProjects(repoRoot).sort()).toEqual([
      'examples',
      ...[
        'cli',
        'config',
        'descriptors',
        'discovery',
        'drain',
        'endpoint',
        'engine-events',
        'errors',
        'inventory',
        'native-bindings',
        'profile-admission',
        'registry',
        'router',
      ].map((name) => `packages/${name}`),
      ...['chaos', 'demo', 'fuzz', 'pack-install', 'readme-snippets', 'repo-checks', 'test-support'].map(
        (name) => `tools/${name}`,
      ),
    ]);
  });
});
