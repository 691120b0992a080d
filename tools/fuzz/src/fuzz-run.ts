import fc from 'fast-check';

/** Cases per target: 100,000 in every run of the suite; `KVREUSE_FUZZ_RUNS` sets another count for a longer hunt. */
export const casesPerTarget = Number(process.env['KVREUSE_FUZZ_RUNS'] ?? 100_000);

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

/** Runs `check` on every case; a case that throws (anything but the assertion of a typed outcome) fails the target. */
export function fuzz<T>(target: string, cases: fc.Arbitrary<T>, check: (input: T) => void): void {
  fc.assert(fc.property(cases, check), fuzzParameters(target));
}
