// Types of test-totals.mjs, for the tests in tools/repo-checks.
export interface VitestReport {
  numPassedTests?: number;
  numFailedTests?: number;
  numPendingTests?: number;
  numTodoTests?: number;
  testResults?: {
    name: string;
    status: string;
    message?: string;
    assertionResults?: { status: string; fullName?: string; title?: string; failureMessages?: string[] }[];
  }[];
}
export interface ReportCount {
  passed: number;
  failed: number;
  skipped: number;
  problems: string[];
  /** Each failed test: `<file> > <full name>: <first line of its error>` (behind `<project>: ` in totals). */
  failures: string[];
}
export interface TestTask {
  project: string;
  /** A signal's name when the run was killed, an error's code when it did not start. */
  exitCode: number | string;
}
export function countReport(report: VitestReport): ReportCount;
export function testTotals(reports: Map<string, VitestReport>, testTasks: readonly TestTask[]): ReportCount;
export function totalsLine(totals: ReportCount): string;
export function readReports(dir: string): Map<string, VitestReport>;
export function testProjects(root: string): string[];
