// Types of test-queue.mjs, for the tests in tools/repo-checks.
export const longestProjects: readonly string[];
export function startOrder(projects: readonly string[], longest?: readonly string[]): string[];
export function runQueue<Status>(
  projects: readonly string[],
  concurrency: number,
  run: (project: string) => Promise<Status>,
): Promise<{ project: string; exitCode: Status }[]>;
