// What a command leaves behind if the process is interrupted (SIGINT, SIGTERM) while it runs: a
// command registers how to undo it, and the first interruption runs every undo before the process ends.

/** Registers `cleanup` to run if the process is interrupted; the returned function takes it back. */
export type WhenInterrupted = (cleanup: () => Promise<void>) => () => void;

/** What `interruptCleanups` needs of a process (the binary passes `process`). */
export interface SignalledProcess {
  readonly pid: number;
  on(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
  off(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
  kill(pid: number, signal: NodeJS.Signals): unknown;
}

const interruptions: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/**
 * Listens for SIGINT and SIGTERM only while a cleanup is registered, so that otherwise they end the
 * process as they always do. The first one runs every cleanup, one after another and the last registered
 * first (a failing one does not stop the others), then raises the same signal again with
 * nobody listening: the process ends by it, and a second interruption during the cleanups ends it at once.
 */
export function interruptCleanups(target: SignalledProcess): WhenInterrupted {
  const cleanups = new Set<() => Promise<void>>();
  const listen = (on: boolean): void => {
    for (const signal of interruptions) (on ? target.on : target.off).call(target, signal, interrupted);
  };
  function interrupted(signal: NodeJS.Signals): void {
    listen(false);
    // Last registered first, each to its end: what was started last may still use what was started before it
    // (the demo's ranks drain through the local etcd it started first).
    const pending = [...cleanups].reverse();
    cleanups.clear();
    void (async () => {
      for (const cleanup of pending)
        await Promise.resolve()
          .then(cleanup)
          .catch(() => undefined);
      target.kill(target.pid, signal);
    })();
  }
  return (cleanup) => {
    if (cleanups.size === 0) listen(true);
    cleanups.add(cleanup);
    return () => {
      if (cleanups.delete(cleanup) && cleanups.size === 0) listen(false);
    };
  };
}
