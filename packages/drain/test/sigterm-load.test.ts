// Process tests: SIGTERM (then SIGINT) while 1,000 loopback operations are in flight. The process
// shuts down source side first (its rank parts withdrawn while every bank is registered, intake open
// and every operation in flight), refuses the posts that keep coming, and exits by itself. The
// worker's deadlines run on a manual clock that this test moves, so each case forces one ordering
// and asserts its one outcome, exit code included (see test/process/sigterm-worker.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { killChildren, runScript } from './support/child.js';

const IN_FLIGHT = 1_000;
const BANKS = 8;
const SETTINGS = {
  KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS: '2000',
  KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS: '4000',
  KVREUSE_TRANSPORT_SHUTDOWN_DEADLINE_MS: '5000',
};

afterEach(killChildren);

/**
 * Starts the worker, signals it once its operations are in flight, waits for its withdrawal (the
 * first shutdown step; the drain then waits for the operations), sends it `order`, and returns its
 * shutdown report and how it exited. A failure carries the worker's stderr.
 */
async function shutDownUnderLoad(
  order: (operationTimeoutMs: number) => object,
  args: readonly string[] = [],
): Promise<{
  report: Record<string, any>;
  exit: { code: number | null; signal: NodeJS.Signals | null };
  operationTimeoutMs: number;
}> {
  const registered = args.includes('--refusing-owner') ? BANKS + 1 : BANKS;
  const worker = runScript('test/process/sigterm-worker.ts', args, SETTINGS);
  try {
    const loaded = await worker.message<{ operationTimeoutMs: number }>('loaded');
    expect(loaded).toEqual({
      event: 'loaded',
      inFlight: IN_FLIGHT,
      nativeInFlight: IN_FLIGHT,
      operationTimeoutMs: 2000,
    });
    worker.child.kill('SIGTERM');
    // A second signal while shutting down joins the same shutdown.
    worker.child.kill('SIGINT');
    // The withdrawal ran first: every bank still registered, intake open, all operations in flight.
    expect(await worker.message('withdrawn')).toEqual({
      event: 'withdrawn',
      intakeStopped: false,
      liveRegistrations: registered,
      live: IN_FLIGHT,
    });
    worker.send(order(loaded.operationTimeoutMs));
    const report = await worker.message<Record<string, any>>('shut-down');
    return { report, exit: await worker.exit, operationTimeoutMs: loaded.operationTimeoutMs };
  } catch (error) {
    throw new Error(`${String(error)}\nworker stderr:\n${worker.stderr()}`, { cause: error });
  }
}

/**
 * Checks that the steps ran in the order they started, each ok but those given as failed (no
 * inventory withdrawal or readers' wait was given: those are skipped).
 */
function expectSteps(
  result: { steps: { step: string; outcome: string; startedAt: number }[] },
  failed: readonly string[] = [],
): void {
  const started = result.steps.map((step) => step.startedAt);
  expect(started).toEqual([...started].sort((a, b) => a - b));
  const skipped = ['withdraw-inventory', 'wait-for-readers'];
  const order = [
    'withdraw-rank-parts',
    ...skipped,
    'stop-intake',
    'drain',
    'invalidate-peers',
    'deregister',
    'hand-back',
    'destroy-agent',
  ];
  expect(result.steps.map((step) => [step.step, step.outcome])).toEqual(
    order.map((step) => [step, skipped.includes(step) ? 'skipped' : failed.includes(step) ? 'failed' : 'ok']),
  );
}

/** The 8 banks handed back, and the 1,000 operations quiescent, each followed by a post refused at once (intake stopped first). */
function expectBanksReturnedAndOperationsEnded(report: Record<string, any>): void {
  expect(report['result'].report.banksReturned).toHaveLength(BANKS);
  expect(report['bankStates']).toEqual(Array(BANKS).fill('returned'));
  expect(report['quiescent']).toBe(IN_FLIGHT);
  expect(report['refused']).toBe(IN_FLIGHT);
  expect(report['otherErrors']).toBe(0);
}

/** What a shutdown that retained nothing ends with: every step ok, every bank handed back, the agent destroyed, exit 0. */
function expectEverythingReturned(
  report: Record<string, any>,
  exit: { code: number | null; signal: NodeJS.Signals | null },
): void {
  expectSteps(report['result']);
  expect(report['result']).toMatchObject({ retained: false, agentDestroyed: true, banksRetained: [], quarantined: [] });
  expectBanksReturnedAndOperationsEnded(report);
  expect(report['readerOpen']).toBe(false);
  expect(exit).toEqual({ code: 0, signal: null });
}

describe('SIGTERM under load', () => {
  it('held operations: their timeout passes during the drain, each is cancelled (confirmed natively), every bank is handed back, exit 0', async () => {
    const { report, exit, operationTimeoutMs } = await shutDownUnderLoad((timeoutMs) => ({ advance: timeoutMs }));
    const { result } = report;
    expect(report['ended']).toEqual({ 'OPERATION_TIMED_OUT transport.operationTimeoutMs': IN_FLIGHT });
    expect(result.report).toMatchObject({ completed: 0, cancelled: IN_FLIGHT, failed: 0, quarantined: [] });
    expect(result.steps.find((step: { step: string }) => step.step === 'drain')).toMatchObject({
      startedAt: 0,
      durationMs: operationTimeoutMs,
    });
    expectEverythingReturned(report, exit);
  }, 60_000);

  it('operations let go during the drain: all 1,000 complete before any deadline, every bank is handed back, exit 0', async () => {
    const { report, exit } = await shutDownUnderLoad(() => ({ release: true }));
    const { result } = report;
    expect(report['ended']).toEqual({ ok: IN_FLIGHT });
    expect(result.report).toMatchObject({ completed: IN_FLIGHT, cancelled: 0, failed: 0, quarantined: [] });
    // The clock never moved: no deadline had any part in it.
    expect(
      result.steps.every(
        (step: { startedAt: number; durationMs: number }) => step.startedAt === 0 && step.durationMs === 0,
      ),
    ).toBe(true);
    expectEverythingReturned(report, exit);
  }, 60_000);

  it('a bank whose owner refuses it back: the operations complete, the other 8 banks are handed back, that one is listed retained, exit 1', async () => {
    const { report, exit } = await shutDownUnderLoad(() => ({ release: true }), ['--refusing-owner']);
    const { result } = report;
    expect(report['ended']).toEqual({ ok: IN_FLIGHT });
    expect(result.report).toMatchObject({ completed: IN_FLIGHT, cancelled: 0, failed: 0, quarantined: [] });
    const refusal = { bank: expect.objectContaining({ tpRank: 2, index: 0 }), retainedBy: 'owner-refusal' };
    expect(result.report.banksRetained).toEqual([
      expect.objectContaining({ ...refusal, code: 'BANK_OWNER_RELEASE_FAILED' }),
    ]);
    expect(result.banksRetained).toEqual([expect.objectContaining(refusal)]);
    // The refused bank's memory is still allocated from the agent, so the agent is kept.
    expectSteps(result, ['hand-back', 'destroy-agent']);
    expect(result).toMatchObject({ retained: true, agentDestroyed: false, quarantined: [] });
    expectBanksReturnedAndOperationsEnded(report);
    expect(report['readerOpen']).toBe(true);
    expect(exit).toEqual({ code: 1, signal: null });
  }, 60_000);
});
