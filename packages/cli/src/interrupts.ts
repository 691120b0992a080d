// What a command leaves behind if the process is interrupted (SIGINT, SIGTERM) or its output's reader
// goes away (EPIPE) while it runs: a command registers how to undo it, and the first interruption runs
// every undo before the process ends.

/** Registers `cleanup` to run if the process is interrupted; the returned function takes it back. */
export type WhenInterrupted = (cleanup: () => Promise<void>) => () => void;

/** What `interruptCleanups` needs of a process (the binary passes `process`). */
export interface SignalledProcess {
  readonly pid: number;
  on(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
  off(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown;
  kill(pid: number, signal: NodeJS.Signals): unknown;
  exit(code: number): unknown;
}

/** `WhenInterrupted`, and what the binary calls when its stdout's or stderr's reader has gone (EPIPE). */
export interface InterruptCleanups extends WhenInterrupted {
  /** Runs every registered cleanup, then ends the process with status 141, as a shell reports a process ended by SIGPIPE (Node ignores that signal). */
  readonly brokenPipe: () => void;
  /**
   * Resolves with the next SIGINT or SIGTERM, which then runs no cleanup and ends nothing: the command
   * that waits for it (`kvreuse demo --hold`) ends by itself. A later one interrupts as usual.
   */
  readonly nextSignal: () => Promise<NodeJS.Signals>;
}

/** The status of a process ended by SIGPIPE (128 + 13). */
export const brokenPipeStatus = 141;

const interruptions: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/**
 * Listens for SIGINT and SIGTERM only while a cleanup is registered, so that otherwise they end the
 * process as they always do. The first one runs every cleanup, one after another and the last registered
 * first (a failing one does not stop the others), then raises the same signal again with
 * nobody listening: the process ends by it, and a second interruption during the cleanups ends it at once.
 * `brokenPipe()` runs them the same way, then ends the process with status 141.
 */
export function interruptCleanups(target: SignalledProcess): InterruptCleanups {
  const cleanups = new Set<() => Promise<void>>();
  let waiting: ((signal: NodeJS.Signals) => void) | undefined;
  let listening = false;
  let ending = false;
  // Listening while a cleanup is registered or a command waits for a signal, and never once ending.
  const listen = (): void => {
    const on = !ending && (cleanups.size > 0 || waiting !== undefined);
    if (on === listening) return;
    listening = on;
    for (const signal of interruptions) (on ? target.on : target.off).call(target, signal, interrupted);
  };
  const interrupted = (signal: NodeJS.Signals): void => {
    const waiter = waiting;
    waiting = undefined;
    if (waiter === undefined) end(() => target.kill(target.pid, signal));
    else {
      listen();
      waiter(signal);
    }
  };
  function end(then: () => void): void {
    if (ending) return;
    ending = true;
    listen();
    // Last registered first, each to its end: what was started last may still use what was started before it
    // (the demo's ranks drain through the local etcd it started first).
    const pending = [...cleanups].reverse();
    cleanups.clear();
    void (async () => {
      for (const cleanup of pending)
        await Promise.resolve()
          .then(cleanup)
          .catch(() => undefined);
      then();
    })();
  }
  const register: WhenInterrupted = (cleanup) => {
    cleanups.add(cleanup);
    listen();
    return () => {
      if (cleanups.delete(cleanup)) listen();
    };
  };
  const nextSignal = (): Promise<NodeJS.Signals> =>
    new Promise((resolve) => {
      waiting = resolve;
      listen();
    });
  return Object.assign(register, { brokenPipe: () => end(() => target.exit(brokenPipeStatus)), nextSignal });
}
