// Process tests: SIGTERM (then SIGINT) while 1,000 loopback operations are in flight. The process
// shuts down source side first (its rank parts withdrawn while every bank is registered, intake open
// and every operation in flight), refuses the posts that keep coming, and exits by itself. The
// worker's deadlines run on a manual clock that this test moves, so each case forces one ordering
// and asserts its one outcome, exit code included (see test/process/sigterm-worker.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { killChildren, runScript, type ScriptProcess } from './support/child.js';

const IN_FLIGHT = 1_000;
const BANKS = 8;
const SETTINGS = {
  KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS: '2000',
  KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS: '4000',
  KVREUSE_TRANSPORT_SHUTDOWN_DEADLINE_MS: '5000',
};

afterEach(killChildren);

/**
 * Starts the worker, signals it once its operations are in flight, and returns it once its withdrawal
 * (the first shutdown step) ran; the drain then waits for the operations.
 */
async function signalUnderLoad(args: readonly string[] = []): Promise<{ worker: ScriptProcess; operationTimeoutMs: number }> {
  const registered = args.includes('--refusing-owner') ? BANKS + 1 : BANKS;
  const worker = runScript('test/process/sigterm-worker.ts', args, SETTINGS);
  const loaded = await worker.message<{ operationTimeoutMs: number }>('loaded');
  expect(loaded).toEqual({ event: 'loaded', inFlight: IN_FLIGHT, nativeInFlight: IN_FLIGHT, operationTimeoutMs: 2000 });
  worker.child.kill('SIGTERM');
  // A second signal while shutting down joins the same shutdown.
  worker.child.kill('SIGINT');
  // The withdrawal ran first: every bank still registered, intake open, all operations in flight.
  expect(await worker.message('withdrawn')).toEqual({ event: 'withdrawn', intakeStopped: false, liveRegistrations: registered, live: IN_FLIGHT });
  return { worker, operationTimeoutMs: loaded.operationTimeoutMs };
}

/** The steps as they ran, in the order they started, with their outcomes. */
function stepsOf(result: { steps: { step: string; outcome: string; startedAt: number }[] }): [string, string][] {
  const started = result.steps.map((step) => step.startedAt);
  expect(started).toEqual([...started].sort((a, b) => a - b));
  return result.steps.map((step) => [step.step, step.outcome]);
}

/** What the 1,000 operations end with in every case: quiescent, each followed by a post refused at once (intake stopped first). */
function expectOperationsEnded(report: Record<string, any>): void {
  expect(report['quiescent']).toBe(IN_FLIGHT);
  expect(report['refused']).toBe(IN_FLIGHT);
  expect(report['otherErrors']).toBe(0);
}

/** What the first two cases end with: one shutdown, its steps in order, every bank handed back, the agent destroyed. */
function expectEverythingReturned(report: Record<string, any>): void {
  const { result } = report;
  expect(stepsOf(result)).toEqual([
    ['withdraw-rank-parts', 'ok'],
    ['withdraw-inventory', 'skipped'],
    ['wait-for-readers', 'skipped'],
    ['stop-intake', 'ok'],
    ['drain', 'ok'],
    ['invalidate-peers', 'ok'],
    ['deregister', 'ok'],
    ['hand-back', 'ok'],
    ['destroy-agent', 'ok'],
  ]);
  expect(result.report.banksReturned).toHaveLength(BANKS);
  expect(result).toMatchObject({ retained: false, agentDestroyed: true, banksRetained: [], quarantined: [] });
  expect(report['bankStates']).toEqual(Array(BANKS).fill('returned'));
  expect(report['readerOpen']).toBe(false);
  expectOperationsEnded(report);
}

describe('SIGTERM under load', () => {
  it('held operations: their timeout passes during the drain, each is cancelled (confirmed natively), every bank is handed back, exit 0', async () => {
    const { worker, operationTimeoutMs } = await signalUnderLoad();
    try {
      worker.send({ advance: operationTimeoutMs });
      const report = await worker.message<Record<string, any>>('shut-down');
      expect(report['ended']).toEqual({ 'OPERATION_TIMED_OUT transport.operationTimeoutMs': IN_FLIGHT });
      expect(report['result'].report).toMatchObject({ completed: 0, cancelled: IN_FLIGHT, failed: 0, quarantined: [] });
      expect(report['result'].steps.find((step: { step: string }) => step.step === 'drain')).toMatchObject({ startedAt: 0, durationMs: operationTimeoutMs });
      expectEverythingReturned(report);
      expect(await worker.exit).toEqual({ code: 0, signal: null });
    } catch (error) {
      throw new Error(`${String(error)}\nworker stderr:\n${worker.stderr()}`, { cause: error });
    }
  }, 60_000);

  it('operations let go during the drain: all 1,000 complete before any deadline, every bank is handed back, exit 0', async () => {
    const { worker } = await signalUnderLoad();
    try {
      worker.send({ release: true });
      const report = await worker.message<Record<string, any>>('shut-down');
      expect(report['ended']).toEqual({ ok: IN_FLIGHT });
      expect(report['result'].report).toMatchObject({ completed: IN_FLIGHT, cancelled: 0, failed: 0, quarantined: [] });
      // The clock never moved: no deadline had any part in it.
      expect(report['result'].steps.every((step: { startedAt: number; durationMs: number }) => step.startedAt === 0 && step.durationMs === 0)).toBe(true);
      expectEverythingReturned(report);
      expect(await worker.exit).toEqual({ code: 0, signal: null });
    } catch (error) {
      throw new Error(`${String(error)}\nworker stderr:\n${worker.stderr()}`, { cause: error });
    }
  }, 60_000);

  it('a bank whose owner refuses it back: the operations complete, the other 8 banks are handed back, that one is listed retained, exit 1', async () => {
    const { worker } = await signalUnderLoad(['--refusing-owner']);
    try {
      worker.send({ release: true });
      const report = await worker.message<Record<string, any>>('shut-down');
      const { result } = report;
      expect(report['ended']).toEqual({ ok: IN_FLIGHT });
      expect(result.report).toMatchObject({ completed: IN_FLIGHT, cancelled: 0, failed: 0, quarantined: [] });
      expect(result.report.banksReturned).toHaveLength(BANKS);
      const refusal = { bank: expect.objectContaining({ tpRank: 2, index: 0 }), retainedBy: 'owner-refusal' };
      expect(result.report.banksRetained).toEqual([expect.objectContaining({ ...refusal, code: 'BANK_OWNER_RELEASE_FAILED' })]);
      expect(result.banksRetained).toEqual([expect.objectContaining(refusal)]);
      // The refused bank's memory is still allocated from the agent, so the agent is kept.
      expect(stepsOf(result)).toEqual([
        ['withdraw-rank-parts', 'ok'],
        ['withdraw-inventory', 'skipped'],
        ['wait-for-readers', 'skipped'],
        ['stop-intake', 'ok'],
        ['drain', 'ok'],
        ['invalidate-peers', 'ok'],
        ['deregister', 'ok'],
        ['hand-back', 'failed'],
        ['destroy-agent', 'failed'],
      ]);
      expect(result).toMatchObject({ retained: true, agentDestroyed: false, quarantined: [] });
      expect(report['bankStates']).toEqual(Array(BANKS).fill('returned'));
      expectOperationsEnded(report);
      expect(await worker.exit).toEqual({ code: 1, signal: null });
    } catch (error) {
      throw new Error(`${String(error)}\nworker stderr:\n${worker.stderr()}`, { cause: error });
    }
  }, 60_000);
});
