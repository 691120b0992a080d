// The tally of a series of runs: how many of each fault kind ended in each outcome, and which broke an invariant.
import type { PullOutcome } from './run-scenario.js';
import { type FaultKind, faultKinds } from './scenario.js';

/** A run's class: its pull outcome; `hang` / `invariant` when it failed a check; `setup-failed` when its ranks did not start. */
export type RunClass = PullOutcome | 'hang' | 'invariant' | 'setup-failed';
const failedClasses: readonly RunClass[] = ['hang', 'invariant', 'setup-failed'];

export class OutcomeCounts {
  readonly #counts = new Map<FaultKind, Map<RunClass, number>>();

  add(kind: FaultKind, runClass: RunClass): void {
    const row = this.#counts.get(kind) ?? new Map<RunClass, number>();
    row.set(runClass, (row.get(runClass) ?? 0) + 1);
    this.#counts.set(kind, row);
  }

  /** Runs that hung, broke an invariant or could not be set up. */
  get failed(): number {
    let failed = 0;
    for (const row of this.#counts.values()) for (const runClass of failedClasses) failed += row.get(runClass) ?? 0;
    return failed;
  }

  /** One line per fault kind that ran: `kind  runs  class n, class n`. */
  render(): string[] {
    return faultKinds.flatMap((kind) => {
      const row = this.#counts.get(kind);
      if (row === undefined) return [];
      const runs = [...row.values()].reduce((sum, n) => sum + n, 0);
      const classes = [...row.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([runClass, n]) => `${runClass} ${n}`);
      return [`${kind.padEnd(13)} ${String(runs).padStart(3)} runs: ${classes.join(', ')}`];
    });
  }
}
