import { messageOf } from '@kvreuse/errors';

/** One step of taking something down: `doing` says what it does, for the error that reports its failure. */
export interface Step {
  readonly doing: string;
  readonly run: () => unknown;
}

/**
 * Runs every step in turn, each whatever the ones before it threw, so that one failure leaves nothing after it
 * open; then, if any failed, throws an AggregateError of what they threw, in step order, whose message says
 * `what` and names each failed step with its error's message.
 */
export async function runEveryStep(what: string, steps: readonly Step[]): Promise<void> {
  const failures: { doing: string; error: unknown }[] = [];
  for (const { doing, run } of steps) {
    try {
      await run();
    } catch (error) {
      failures.push({ doing, error });
    }
  }
  if (failures.length === 0) return;
  throw new AggregateError(
    failures.map(({ error }) => error),
    `${what}: ${failures.map(({ doing, error }) => `${doing} failed: ${messageOf(error)}`).join('; ')}`,
  );
}
