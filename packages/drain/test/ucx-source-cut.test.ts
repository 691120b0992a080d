// Process tests on ucx: the source is cut off in the middle of a 308 MB pull — killed with SIGKILL,
// or stopped with SIGSTOP. The source is stopped before the pull is posted (after a warm-up read), so
// the pull is in flight when the cut lands, however fast the machine. Each case forces one ordering
// through the ledger's deadlines and asserts
// its one outcome: the native layer ends the operation (bounded: a killed peer is noticed, a cancel
// ends within about a second), the bank stays retained until then and is handed back after, drain
// completes, and nothing is quarantined, crashes or hangs.
import { stopProcess } from '@kvreuse-internal/test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { killChildren, runScript, type ScriptProcess } from './support/child.js';
import { ucxTestsRun } from './support/loopback-world.js';

// Over tcp a get needs the source's progress, so a stopped source holds the pull in flight.
const SLOW_PATH = { UCX_TLS: 'tcp' };
const ALL_RELEASED = {
  liveAgents: 0,
  liveRegistrations: 0,
  liveAllocations: 0,
  liveOperations: 0,
  inflightRequests: 0,
};

afterEach(killChildren);

/**
 * Connects the destination, stops the source, starts the pull of the prefix and, once its UCX
 * requests are in flight, cuts the source off with `signal` (SIGSTOP: it stays stopped); returns both
 * processes. `ordering` picks the destination's deadlines (see test/process/ucx-destination.ts).
 */
async function cutMidPull(
  label: string,
  signal: 'SIGKILL' | 'SIGSTOP',
  ordering: 'native-first' | 'timeout-first',
): Promise<{ source: ScriptProcess; destination: ScriptProcess }> {
  const sourceName = `${label}-source-${process.pid}`;
  const source = runScript('test/process/ucx-source.ts', [sourceName], SLOW_PATH);
  const destination = runScript(
    'test/process/ucx-destination.ts',
    [`${label}-destination-${process.pid}`, sourceName, ordering],
    SLOW_PATH,
  );
  destination.send(await source.message('ready'));
  await destination.message('connected');
  await stopProcess(source.child.pid!);
  destination.send({ event: 'source-stopped' });
  expect(await destination.message('pulling')).toEqual({
    event: 'pulling',
    phase: 'in-flight',
    inflightRequests: true,
  });
  if (signal === 'SIGKILL') source.child.kill('SIGKILL');
  destination.send({ event: 'cut' });
  return { source, destination };
}

function withStderr(error: unknown, ...processes: ScriptProcess[]): Error {
  return new Error(`${String(error)}\n${processes.map((p, i) => `stderr ${i}:\n${p.stderr()}`).join('\n')}`, {
    cause: error,
  });
}

/** What every case ends with: quiescent, the bank handed back, drain complete, nothing retained. */
function expectReleased(done: Record<string, any>): void {
  expect(done['afterEnd']).toMatchObject({ phase: 'quiescent', references: 0 });
  expect(done['afterEnd'].health.healthy).toBe(false);
  expect(done['shutdown']).toMatchObject({ retained: false, quarantined: 0, banksRetained: [] });
  expect(done['finalBankState']).toBe('returned');
  expect(done['counters']).toMatchObject(ALL_RELEASED);
}

describe.runIf(ucxTestsRun)('a 308 MB ucx pull whose source is cut off', () => {
  it('SIGKILL, the native layer first: the operation fails with REMOTE_DISCONNECT, its bank is handed back, drain completes', async () => {
    const { source, destination } = await cutMidPull('sigkill', 'SIGKILL', 'native-first');
    try {
      expect(await source.exit).toEqual({ code: null, signal: 'SIGKILL' });
      await destination.message('quiescent');
      destination.send({ event: 'shut-down' });
      const done = await destination.message<Record<string, any>>('done');
      expect(done['outcome']).toMatchObject({ ok: false, code: 'OPERATION_FAILED' });
      expect(done['outcome'].message).toContain('REMOTE_DISCONNECT');
      expect(done['quiescence']).toMatchObject({
        terminal: 'failed',
        code: 'REMOTE_DISCONNECT',
        late: false,
        quarantined: false,
      });
      expectReleased(done);
      expect(await destination.exit).toEqual({ code: 0, signal: null });
    } catch (error) {
      throw withStderr(error, source, destination);
    }
  }, 90_000);

  it('SIGSTOP, the timeout first: the timed-out operation is cancelled and ends natively before the abandon deadline, its bank is handed back', async () => {
    const { source, destination } = await cutMidPull('sigstop', 'SIGSTOP', 'timeout-first');
    try {
      // The operation ends while the source is still stopped, and the shutdown runs with it still
      // stopped: closing the agent does not wait for the source.
      await destination.message('quiescent');
      destination.send({ event: 'shut-down' });
      const done = await destination.message<Record<string, any>>('done');
      expect(done['outcome']).toMatchObject({ ok: false, code: 'OPERATION_TIMED_OUT' });
      expect(done['quiescence']).toMatchObject({
        terminal: 'cancelled',
        code: 'CANCELED',
        late: false,
        quarantined: false,
      });
      expectReleased(done);
      expect(await destination.exit).toEqual({ code: 0, signal: null });
    } catch (error) {
      throw withStderr(error, source, destination);
    }
  }, 90_000);
});
