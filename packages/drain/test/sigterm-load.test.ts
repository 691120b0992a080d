// Process tests: SIGTERM (then SIGINT) while 1,000 loopback operations are in flight. The process
// shuts down source side first (its rank parts withdrawn while every bank is registered, intake open
// and every operation in flight), refuses the posts that keep coming, and exits by itself. The
// worker's deadlines run on a manual clock that this test moves, so each case forces one ordering
// and asserts its one outcome (see test/process/sigterm-worker.ts).
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
async function signalUnderLoad(): Promise<{ worker: ScriptProcess; operationTimeoutMs: number }> {
  const worker = runScript('test/process/sigterm-worker.ts', [], SETTINGS);
  const loaded = await worker.message<{ operationTimeoutMs: number }>('loaded');
  expect(loaded).toEqual({ event: 'loaded', inFlight: IN_FLIGHT, nativeInFlight: IN_FLIGHT, operationTimeoutMs: 2000 });
  worker.child.kill('SIGTERM');
  // A second signal while shutting down joins the same shutdown.
  worker.child.kill('SIGINT');
  // The withdrawal ran first: every bank still registered, intake open, all operations in flight.
  expect(await worker.message('withdrawn')).toEqual({ event: 'withdrawn', intakeStopped: false, liveRegistrations: BANKS, live: IN_FLIGHT });
  return { worker, operationTimeoutMs: loaded.operationTimeoutMs };
}

/** What both cases end with: one shutdown, its steps in order, every bank handed back, the agent destroyed. */
function expectEverythingReturned(report: Record<string, any>): void {
  const { result } = report;
  const started = result.steps.map((step: { startedAt: number }) => step.startedAt);
  expect(started).toEqual([...started].sort((a, b) => a - b));
  expect(result.steps.map((step: { step: string; outcome: string }) => [step.step, step.outcome])).toEqual([
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
  expect(report['quiescent']).toBe(IN_FLIGHT);
  expect(report['readerOpen']).toBe(false);
  // Every operation that ended was followed by a new post, refused at once: intake stopped first.
  expect(report['refused']).toBe(IN_FLIGHT);
  expect(report['otherErrors']).toBe(0);
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
});
