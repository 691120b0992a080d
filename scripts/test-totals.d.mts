// Types of test-totals.mjs, for the tests in tools/repo-checks.
export interface VitestReport {
  numPassedTests?: number;
  numFailedTests?: number;
  numPendingTests?: number;
  numTodoTests?: number;
  testResults?: { name: string; status: string; message?: string; assertionResults?: { status: string }[] }[];
}
export interface ReportCount {
  passed: number;
  failed: number;
  skipped: number;
  problems: string[];
}
export interface TestTask {
  project: string;
  exitCode: number | undefined;
}
export interface TurboRunSummary {
  tasks: { task: string; directory: string; execution?: { exitCode?: number } }[];
}
export function countReport(report: VitestReport): ReportCount;
export function testTotals(reports: Map<string, VitestReport>, testTasks: readonly TestTask[]): ReportCount;
export function totalsLine(totals: ReportCount): string;
export function readReports(dir: string): Map<string, VitestReport>;
export function testTasksOf(summary: TurboRunSummary, projects: readonly string[]): TestTask[];
export function testProjects(root: string): string[];
