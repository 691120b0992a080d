// The demo's router warmed up before its timed decisions, unless its lookups are unbounded.

const warmUpRounds = 16;
const compilerSettleMs = 50;

/**
 * A deployment's router is warm. This one is new: its first decisions would spend the lookup budget
 * (2 ms by default, charged with CPU time) compiling and running cold code on this thread, and where
 * Node reports only the process's CPU time, the compiler threads optimizing it count too; so it decides
 * each request a few times (`decideEach`) and forgets the answers, then lets the compiler finish
 * (`settle`). With an unbounded lookup there is no budget to spend, and it does neither.
 */
export async function warmUpRouter(
  unboundedLookup: boolean,
  decideEach: () => void,
  settle: () => Promise<void> = () => new Promise((resolve) => setTimeout(resolve, compilerSettleMs)),
): Promise<void> {
  if (unboundedLookup) return;
  for (let round = 0; round < warmUpRounds; round++) decideEach();
  await settle();
}
