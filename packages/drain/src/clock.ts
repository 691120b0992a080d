/**
 * Time as the drain layer sees it: a monotonic `now()` and one re-armable timer. Tests pass a manual
 * clock; production uses `systemClock`.
 */
export interface Clock {
  /** Monotonic milliseconds. */
  now(): number;
  /** Calls `callback` once after `delayMs`; returns a handle for `clearTimer`. */
  setTimer(callback: () => void, delayMs: number): unknown;
  clearTimer(handle: unknown): void;
}

/** The longest delay `setTimeout` keeps: a longer one fires after 1 ms. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A `systemClock` timer: the timeout now armed (a delay past `MAX_TIMEOUT_MS` is armed in parts). */
interface SystemTimer {
  timeout: ReturnType<typeof setTimeout>;
}

function armSystemTimer(timer: SystemTimer, callback: () => void, delayMs: number): void {
  const remainingMs = Math.max(0, delayMs) - MAX_TIMEOUT_MS;
  timer.timeout = setTimeout(
    remainingMs > 0 ? () => armSystemTimer(timer, callback, remainingMs) : callback,
    Math.min(Math.max(0, delayMs), MAX_TIMEOUT_MS),
  ).unref();
}

/**
 * `performance.now()` and `setTimeout`. The timer does not keep the process alive on its own: in-flight
 * native operations do (their agent's wake-up channel is referenced while operations are pending).
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer: (callback, delayMs) => {
    const timer = {} as SystemTimer;
    armSystemTimer(timer, callback, delayMs);
    return timer;
  },
  clearTimer: (handle) => clearTimeout((handle as SystemTimer | null | undefined)?.timeout),
};
