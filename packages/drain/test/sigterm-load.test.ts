// Process test: SIGTERM while 1,000 operations are in flight. The process must shut down source side
// first (its rank parts withdrawn while every bank is registered and intake is open) and exit by itself (under the shutdown deadline, which the drain enforces), with every bank
// either returned or listed as retained.
import { afterEach, describe, expect, it } from 'vitest';
import { killChildren, runScript } from './support/child.js';

afterEach(killChildren);

describe('SIGTERM under load', () => {
  it(
    'shuts down 1,000 in-flight operations source side first and exits, every bank returned or listed retained',
    async () => {
      const worker = runScript('test/process/sigterm-worker.ts', [], {
        KVREUSE_TRANSPORT_OPERATION_TIMEOUT_MS: '2000',
        KVREUSE_TRANSPORT_ABANDON_TIMEOUT_MS: '4000',
        KVREUSE_TRANSPORT_SHUTDOWN_DEADLINE_MS: '5000',
      });
      try {
        expect(await worker.message('loaded')).toEqual({ event: 'loaded', inFlight: 1000, nativeInFlight: 1000 });
        worker.child.kill('SIGTERM');
        // A second signal while shutting down joins the same shutdown.
        worker.child.kill('SIGINT');
        const report = await worker.message<Record<string, any>>('shut-down');
        const { result } = report;
        // The withdrawal ran first: every bank still registered, intake open, all operations in flight.
        expect(report['atWithdrawal']).toEqual({ intakeStopped: false, liveRegistrations: 8, live: 1000 });
        const started = result.steps.map((step: { startedAt: number }) => step.startedAt);
        expect(started).toEqual([...started].sort((a, b) => a - b));
        expect(result.report.completed + result.report.cancelled + result.report.failed + result.report.quarantined.length).toBe(1000);
        const returned = result.report.banksReturned.length;
        const retained = result.report.banksRetained.length;
        expect(returned + retained).toBe(8);
        expect(report['bankStates'].filter((state: string) => state === 'returned')).toHaveLength(returned);
        expect(result.retained).toBe(retained > 0 || result.report.quarantined.length > 0);
        expect(report['quiescent']).toBe(1000 - result.report.quarantined.length);
        // Posts kept coming during the shutdown and were refused at once.
        expect(report['refused']).toBeGreaterThan(0);
        expect(report['otherErrors']).toBe(0);
        expect(await worker.exit).toEqual({ code: result.retained ? 1 : 0, signal: null });
      } catch (error) {
        throw new Error(`${String(error)}\nworker stderr:\n${worker.stderr()}`, { cause: error });
      } finally {
        worker.child.kill('SIGKILL');
      }
    },
    90_000,
  );
});
