import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { brokenPipeStatus, interruptCleanups, type SignalledProcess } from './interrupts.js';

/** A process whose signals the test emits; what it raises on itself is logged after the cleanups' steps. */
function signalledProcess(
  log: string[],
): SignalledProcess & { readonly emitter: EventEmitter; readonly raised: Promise<void>; listening(): number } {
  const emitter = new EventEmitter();
  let raise!: () => void;
  const raised = new Promise<void>((resolve) => (raise = resolve));
  return {
    pid: 4242,
    emitter,
    raised,
    on: (signal, listener) => emitter.on(signal, listener),
    off: (signal, listener) => emitter.off(signal, listener),
    kill: (pid, signal) => {
      log.push(`raised ${signal} at ${pid}`);
      raise();
    },
    exit: (code) => {
      log.push(`exit ${code}`);
      raise();
    },
    listening: () => emitter.listenerCount('SIGINT') + emitter.listenerCount('SIGTERM'),
  };
}

describe('interruptCleanups', () => {
  it('listens for SIGINT and SIGTERM only while a cleanup is registered', () => {
    const target = signalledProcess([]);
    const whenInterrupted = interruptCleanups(target);
    expect(target.listening()).toBe(0);
    const first = whenInterrupted(async () => undefined);
    const second = whenInterrupted(async () => undefined);
    expect(target.listening()).toBe(2);
    first();
    first();
    expect(target.listening()).toBe(2);
    second();
    expect(target.listening()).toBe(0);
  });

  it.each(['SIGINT', 'SIGTERM'] as const)(
    '%s runs every registered cleanup one after another, the last registered first, a failing one too, then raises the signal again with nobody listening',
    async (signal) => {
      const log: string[] = [];
      const target = signalledProcess(log);
      const whenInterrupted = interruptCleanups(target);
      let finishSlow = (): void => undefined;
      const slowStarted = new Promise<void>((started) => {
        whenInterrupted(async () => void log.push('first registered'));
        whenInterrupted(() => {
          started();
          return new Promise<void>((resolve) => (finishSlow = resolve)).then(() => void log.push('slow cleanup done'));
        });
      });
      whenInterrupted(() => {
        log.push('failing cleanup');
        throw new Error('cleanup failed');
      });
      const takenBack = whenInterrupted(async () => void log.push('taken back'));
      takenBack();
      target.emitter.emit(signal, signal);
      expect(target.listening()).toBe(0);
      await slowStarted;
      // The one registered before the slow one waits for it.
      await new Promise((resolve) => setImmediate(resolve));
      expect(log).toEqual(['failing cleanup']);
      finishSlow();
      await target.raised;
      expect(log).toEqual(['failing cleanup', 'slow cleanup done', 'first registered', `raised ${signal} at 4242`]);
    },
  );

  it('brokenPipe runs every registered cleanup, the last registered first, then exits 141; a signal then is no longer listened for', async () => {
    const log: string[] = [];
    const target = signalledProcess(log);
    const interrupts = interruptCleanups(target);
    interrupts(async () => void log.push('first registered'));
    interrupts(async () => void log.push('second registered'));
    interrupts.brokenPipe();
    expect(target.listening()).toBe(0);
    interrupts.brokenPipe();
    await target.raised;
    expect(log).toEqual(['second registered', 'first registered', `exit ${brokenPipeStatus}`]);
  });

  it('brokenPipe with nothing registered exits 141 at once', async () => {
    const log: string[] = [];
    const target = signalledProcess(log);
    interruptCleanups(target).brokenPipe();
    await target.raised;
    expect(log).toEqual(['exit 141']);
  });

  it('nextSignal resolves with the next signal, which runs no cleanup; the one after interrupts as usual', async () => {
    const log: string[] = [];
    const target = signalledProcess(log);
    const interrupts = interruptCleanups(target);
    const waiting = interrupts.nextSignal();
    // Listening while it waits, with no cleanup registered.
    expect(target.listening()).toBe(2);
    interrupts(async () => void log.push('cleanup'));
    target.emitter.emit('SIGTERM', 'SIGTERM');
    await expect(waiting).resolves.toBe('SIGTERM');
    expect(log).toEqual([]);
    expect(target.listening()).toBe(2);
    target.emitter.emit('SIGINT', 'SIGINT');
    await target.raised;
    expect(log).toEqual(['cleanup', 'raised SIGINT at 4242']);
    expect(target.listening()).toBe(0);
  });
});
