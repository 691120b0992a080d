import fc from 'fast-check';

/**
 * Cases per target: 10,000 in every run of the suite (each target draws a fresh seed, so the runs add up);
 * `KVREUSE_FUZZ_RUNS` sets another count, and `pnpm fuzz` here runs the long campaign (100,000 per target).
 */
export const casesPerTarget = Number(process.env['KVREUSE_FUZZ_RUNS'] ?? 10_000);

/**
 * The fast-check parameters of one target. The seed is printed before the run, so that any run, not only a
 * failing one, can be replayed with `KVREUSE_FUZZ_SEED`.
 */
export function fuzzParameters(target: string): { seed: number; numRuns: number } {
  const given = process.env['KVREUSE_FUZZ_SEED'];
  const seed = given === undefined ? (Math.random() * 2 ** 31) | 0 : Number(given);
  console.log(`fuzz ${target}: ${casesPerTarget} cases, seed ${seed} (KVREUSE_FUZZ_SEED=${seed} replays it)`);
  return { seed, numRuns: casesPerTarget };
}

function withoutStackTraces<T>(run: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return run();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * Runs `check` on every case; a case that throws (anything but the assertion of a typed outcome) fails the target.
 *
 * Most cases end in typed errors, and capturing their stacks was a large share of a case's time: the cases run
 * without stack traces, and a failing one is replayed with them, so that its report shows where its check threw.
 */
export function fuzz<T>(target: string, cases: fc.Arbitrary<T>, check: (input: T) => void): void {
  const parameters = fuzzParameters(target);
  const property = fc.property(cases, check);
  const run = withoutStackTraces(() => fc.check(property, parameters));
  if (!run.failed) return;
  const { counterexamplePath } = run;
  const replay =
    counterexamplePath === null
      ? undefined
      : fc.check(property, { ...parameters, path: counterexamplePath, endOnFailure: true });
  // Only a check that depends on more than its input passes its replay: then the run's own error, without its stack.
  throw new Error(fc.defaultReportMessage(run), {
    cause: replay?.failed === true ? replay.errorInstance : run.errorInstance,
  });
}
