// The order and the pace of the test phase of `npm test`: every project's tests, a fixed number at a
// time, the longest projects first. turbo starts independent tasks in an order of its own, a different
// one each run, and a long project that happens to start last ends the run alone; started first, the
// short projects fill the other slot beside it.

/**
 * The projects whose tests take longest, longest first (their times are in docs/testing.md). Keep the
 * list in that order when those times change; projects not named here start after these.
 */
export const longestProjects = [
  'native-bindings',
  'cli',
  'pack-install',
  'registry',
  'chaos',
  'drain',
  'repo-checks',
  'fuzz',
];

/** `projects` in the order they start: those named in `longest`, in its order, then the others as given. */
export function startOrder(projects, longest = longestProjects) {
  const rank = (project) => (longest.includes(project) ? longest.indexOf(project) : longest.length);
  return [...projects].sort((a, b) => rank(a) - rank(b));
}

/**
 * Runs `run(project)` for every project in the given order, at most `concurrency` at a time: each
 * project starts as soon as one before it ends. Resolves, once all have ended, to each project with
 * what its run resolved to (its exit code).
 */
export async function runQueue(projects, concurrency, run) {
  const exitCodes = new Map();
  const waiting = [...projects];
  async function slot() {
    for (let project = waiting.shift(); project !== undefined; project = waiting.shift())
      exitCodes.set(project, await run(project));
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, waiting.length) }, slot));
  return projects.map((project) => ({ project, exitCode: exitCodes.get(project) }));
}
