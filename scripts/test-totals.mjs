// The closing line of `npm test`: what every package's tests did, from vitest's JSON reports and
// the exit status of each project's test run. A failure counts wherever it shows: a failed test, a
// test file that failed without a failing test (it did not load, or a hook failed), and a test run
// that failed although its report (if any) shows no failure (a crash, an unhandled error).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';

/** The first line of a failure message, without colour codes. */
const firstLine = (message) => (message ?? '').replace(/\x1b\[[0-9;]*m/g, '').split('\n')[0] || 'no message';

/**
 * Counts one vitest JSON report; `failures` names each failed test (its file, its full name, the first
 * line of its error), `problems` each file that failed without a failing test.
 */
export function countReport(report) {
  const problems = [];
  const failures = [];
  for (const file of report.testResults ?? []) {
    const failed = (file.assertionResults ?? []).filter((test) => test.status === 'failed');
    for (const test of failed)
      failures.push(`${file.name} > ${test.fullName ?? test.title}: ${firstLine(test.failureMessages?.[0])}`);
    const failedTests = failed.length;
    if (file.status === 'failed' && failedTests === 0) {
      problems.push(`${file.name} failed outside its tests: ${firstLine(file.message)}`);
    }
  }
  return {
    passed: report.numPassedTests ?? 0,
    failed: (report.numFailedTests ?? 0) + problems.length,
    skipped: (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0),
    problems,
    failures,
  };
}

/**
 * Totals over the reports (project name → report) and the run's test tasks ({ project, exitCode }).
 * A task that did not succeed although its report counted no failure adds one failure, named in
 * `problems`.
 */
export function testTotals(reports, testTasks) {
  const totals = { passed: 0, failed: 0, skipped: 0, problems: [], failures: [] };
  const counted = new Map();
  for (const [project, report] of reports) {
    const count = countReport(report);
    counted.set(project, count);
    totals.passed += count.passed;
    totals.failed += count.failed;
    totals.skipped += count.skipped;
    totals.problems.push(...count.problems.map((problem) => `${project}: ${problem}`));
    totals.failures.push(...count.failures.map((failure) => `${project}: ${failure}`));
  }
  for (const { project, exitCode } of testTasks) {
    if (exitCode === 0 || (counted.get(project)?.failed ?? 0) > 0) continue;
    totals.failed += 1;
    if (!counted.has(project))
      totals.problems.push(`${project}: its test task exited with ${exitCode} and wrote no report`);
    else
      totals.problems.push(`${project}: its test task exited with ${exitCode} although no test failed (see its log)`);
  }
  return totals;
}

/** The line CI reads; it stays alone on its line, in exactly this form. */
export function totalsLine(totals) {
  return `${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`;
}

/** Every `<project>.json` vitest report in `dir`, by project name. */
export function readReports(dir) {
  const files = existsSync(dir) ? readdirSync(dir).filter((file) => file.endsWith('.json')) : [];
  return new Map(files.map((file) => [basename(file, '.json'), JSON.parse(readFileSync(join(dir, file), 'utf8'))]));
}

/**
 * The folders (under `packages/` and `tools/`, and `examples/`) of the workspace packages that have a
 * `test` script. A project is named by its folder's last part, as its vitest project is.
 */
export function testProjects(root) {
  const folders = [
    ...['packages', 'tools'].flatMap((group) => readdirSync(join(root, group)).map((dir) => join(group, dir))),
    'examples',
  ];
  return folders
    .filter((folder) => existsSync(join(root, folder, 'package.json')))
    .filter(
      (folder) => JSON.parse(readFileSync(join(root, folder, 'package.json'), 'utf8')).scripts?.test !== undefined,
    );
}
