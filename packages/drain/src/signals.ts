import type { ShutdownResult } from './drain.js';
import { InvalidDrainOptionError } from './errors.js';
import { checkFunction, checkOptionsObject } from './options.js';

/** What a signal handler needs of a process (a `NodeJS.Process` fits). */
export interface SignalTarget {
  on(signal: NodeJS.Signals, listener: () => void): unknown;
  off(signal: NodeJS.Signals, listener: () => void): unknown;
  exit(code?: number): never | void;
}

export interface ShutdownSignalOptions {
  /** Default SIGTERM and SIGINT. */
  readonly signals?: readonly NodeJS.Signals[];
  /** Default `process`. */
  readonly target?: SignalTarget;
  /** Called with the result before the process exits (e.g. to log it). */
  readonly onResult?: (result: ShutdownResult) => void;
  /** Called when shutdown itself threw, or `onResult` or `exitCode` did (the process then exits with 1). */
  readonly onError?: (error: unknown) => void;
  /** Exit once shut down, with `exitCode(result)`; default true. */
  readonly exit?: boolean;
  /** Default 0 when nothing was retained, else 1. */
  readonly exitCode?: (result: ShutdownResult) => number;
}

/**
 * Wires shutdown to signals. kvreuse never installs signal handlers on its own: this explicit call
 * does. Every signal calls the same idempotent `shutdown()` (source side first: withdrawn from
 * discovery before anything is handed back); the process exits once it resolved, with 1 when
 * something was retained. A failed step that retained nothing (a withdrawal whose parts will expire
 * with their lease) does not change the exit code: `onResult` sees it in `result.steps`.
 * Returns a function that removes the handlers.
 */
export function shutdownOnSignals(
  controller: { shutdown(): Promise<ShutdownResult> },
  options: ShutdownSignalOptions = {},
): () => void {
  checkFunction('controller.shutdown', checkOptionsObject('controller', controller).shutdown);
  checkOptionsObject('options', options);
  const names: unknown = options.signals;
  if (names !== undefined && !(Array.isArray(names) && names.every((signal) => typeof signal === 'string'))) {
    throw new InvalidDrainOptionError('signals', names, 'must be an array of signal names');
  }
  if (options.target !== undefined)
    for (const method of ['on', 'off', 'exit'] as const)
      checkFunction(`target.${method}`, checkOptionsObject('target', options.target)[method]);
  for (const hook of ['onResult', 'onError', 'exitCode'] as const)
    if (options[hook] !== undefined) checkFunction(hook, options[hook]);
  if (options.exit !== undefined && typeof options.exit !== 'boolean')
    throw new InvalidDrainOptionError('exit', options.exit, 'must be true or false');
  // Read once, here: what the caller changes in its options afterwards neither adds nor strands a handler.
  const { target = process, onResult, onError, exit = true } = options;
  const signals = [...(options.signals ?? ['SIGTERM', 'SIGINT'])];
  const exitCode = options.exitCode ?? ((result: ShutdownResult) => (result.retained ? 1 : 0));
  const failed = (error: unknown) => {
    try {
      onError?.(error);
    } finally {
      if (exit) target.exit(1);
    }
  };
  const handler = () => {
    controller.shutdown().then((result) => {
      let code: number;
      try {
        onResult?.(result);
        code = exitCode(result);
      } catch (error) {
        return failed(error);
      }
      if (exit) target.exit(code);
    }, failed);
  };
  for (const signal of signals) target.on(signal, handler);
  return () => {
    for (const signal of signals) target.off(signal, handler);
  };
}
