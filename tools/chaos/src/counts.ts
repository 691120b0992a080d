// The tally of a series of runs: how many of each fault kind ended in each outcome, and which broke an invariant.
import type { PullOutcome } from './run-scenario.js';
import { type FaultKind, faultKinds } from './scenario.js';

/** A run's class: its pull outcome; `hang` / `invariant` when it failed a check; `setup-failed` when its ranks did not start. */
export type RunClass = PullOutcome | 'hang' | 'invariant' | 'setup-failed';
const failedClasses: readonly RunClass[] = ['hang', 'invariant', 'setup-failed'];

/** What a run's survivors quarantined: operations past their abandon deadline unfinished, and the banks that held back. */
export interface RunQuarantine {
  readonly operations: number;
  readonly banksRetained: number;
}

export class OutcomeCounts {
  readonly #counts = new Map<FaultKind, Map<RunClass, number>>();
  readonly #quarantines = new Map<FaultKind, { runs: number; operations: number; banksRetained: number }>();

  /** A run's class, and what it quarantined (a run that failed a check reports none). */
  add(kind: FaultKind, runClass: RunClass, quarantine: RunQuarantine = { operations: 0, banksRetained: 0 }): void {
    const row = this.#counts.get(kind) ?? new Map<RunClass, number>();
    row.set(runClass, (row.get(runClass) ?? 0) + 1);
    this.#counts.set(kind, row);
    if (quarantine.operations === 0) return;
    const tally = this.#quarantines.get(kind) ?? { runs: 0, operations: 0, banksRetained: 0 };
    this.#quarantines.set(kind, {
      runs: tally.runs + 1,
      operations: tally.operations + quarantine.operations,
      banksRetained: tally.banksRetained + quarantine.banksRetained,
    });
  }

  /** Runs that hung, broke an invariant or could not be set up. */
  get failed(): number {
    let failed = 0;
    for (const row of this.#counts.values()) for (const runClass of failedClasses) failed += row.get(runClass) ?? 0;
    return failed;
  }

  /**
   * One line per fault kind that ran: `kind  runs  class n, class n`, and, for a kind with runs that
   * quarantined, `; quarantined in r runs: o operations, b banks retained`.
   */
  render(): string[] {
    return faultKinds.flatMap((kind) => {
      const row = this.#counts.get(kind);
      if (row === undefined) return [];
      const runs = [...row.values()].reduce((sum, n) => sum + n, 0);
      const classes = [...row.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([runClass, n]) => `${runClass} ${n}`);
      const quarantines = this.#quarantines.get(kind);
      const quarantined =
        quarantines === undefined
          ? ''
          : `; quarantined in ${quarantines.runs} runs: ${quarantines.operations} operations, ${quarantines.banksRetained} banks retained`;
      return [`${kind.padEnd(13)} ${String(runs).padStart(3)} runs: ${classes.join(', ')}${quarantined}`];
    });
  }
}
