// The steps of a withdrawal (readiness watch, rank part, inventory), begun at once and waited for together up to
// a deadline: a step that hangs holds the others back no longer than that, and the failure names each step that
// failed or had not settled.
import { messageOf } from '@kvreuse/errors';

export interface WithdrawalStep {
  /** What is left undone when it fails, in words: e.g. "the rank part was not withdrawn". */
  readonly failure: string;
  /** The step under way; `undefined` when there is nothing to withdraw. */
  readonly ended: Promise<unknown> | undefined;
}

/**
 * Waits for every step, or until `until` aborts, and never rejects. Resolves with `undefined` once every step
 * ended well; otherwise, once every step ended or as soon as `until` aborts, with an `AggregateError` whose
 * message names each step that failed and each that had not settled (`failure: why`, the abort's reason for the
 * latter), its `errors` theirs. At the abort it resolves within the abort's listener, so that a drain racing
 * this against the same deadline reports it rather than its own.
 */
export function notWithdrawn(
  steps: readonly WithdrawalStep[],
  until: AbortSignal,
): Promise<AggregateError | undefined> {
  return new Promise((resolve) => {
    const outcomes: (PromiseSettledResult<unknown> | undefined)[] = steps.map(() => undefined);
    let unsettled = steps.length;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      until.removeEventListener('abort', finish);
      const failed = steps.flatMap(({ failure }, index) => {
        const outcome = outcomes[index];
        if (outcome === undefined) return [{ failure, error: until.reason as unknown }];
        return outcome.status === 'rejected' ? [{ failure, error: outcome.reason as unknown }] : [];
      });
      resolve(
        failed.length === 0
          ? undefined
          : new AggregateError(
              failed.map(({ error }) => error),
              failed.map(({ failure, error }) => `${failure}: ${messageOf(error)}`).join('; '),
            ),
      );
    };
    const settle = (index: number, outcome: PromiseSettledResult<unknown>): void => {
      outcomes[index] = outcome;
      unsettled -= 1;
      if (unsettled === 0) finish();
    };
    steps.forEach(({ ended }, index) =>
      Promise.resolve(ended).then(
        (value) => settle(index, { status: 'fulfilled', value }),
        (reason: unknown) => settle(index, { status: 'rejected', reason }),
      ),
    );
    if (steps.length === 0 || until.aborted) finish();
    else until.addEventListener('abort', finish, { once: true });
  });
}
