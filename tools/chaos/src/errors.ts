// The chaos runner's errors: every one names the seed that replays it.

export type ChaosErrorCode = 'CHAOS_USAGE' | 'CHAOS_SETUP' | 'CHAOS_HANG' | 'CHAOS_INVARIANT';

export abstract class ChaosError extends Error {
  abstract readonly code: ChaosErrorCode;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A bad argument of `pnpm chaos`: `option` is the one, `why` what it must be. */
export class ChaosUsageError extends ChaosError {
  readonly code = 'CHAOS_USAGE';
  constructor(
    readonly option: string,
    readonly why: string,
  ) {
    super(`chaos: ${option} ${why}`);
  }
}

/** A run that could not be set up (its ranks did not start), before any fault: `step` names the step, `why` what failed. */
export class ChaosSetupError extends ChaosError {
  readonly code = 'CHAOS_SETUP';
  constructor(
    readonly seed: number,
    readonly step: string,
    readonly why: string,
  ) {
    super(`seed ${seed}: ${step} failed before any fault: ${why} (replay: pnpm chaos --seed ${seed})`);
  }
}

/** A step of a run that did not end within its bound: a hang. */
export class ChaosHangError extends ChaosError {
  readonly code = 'CHAOS_HANG';
  constructor(
    readonly seed: number,
    readonly step: string,
    readonly timeoutMs: number,
  ) {
    super(`seed ${seed}: ${step} did not end within ${timeoutMs} ms (replay: pnpm chaos --seed ${seed})`);
  }
}

/** A run that ended but broke an invariant: `invariant` names it, `evidence` what was seen. */
export class ChaosInvariantError extends ChaosError {
  readonly code = 'CHAOS_INVARIANT';
  constructor(
    readonly seed: number,
    readonly invariant: string,
    readonly evidence: string,
  ) {
    super(`seed ${seed}: ${invariant}: ${evidence} (replay: pnpm chaos --seed ${seed})`);
  }
}
