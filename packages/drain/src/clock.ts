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

/**
 * `performance.now()` and `setTimeout`. The timer does not keep the process alive on its own: in-flight
 * native operations do (their agent's wake-up channel is referenced while operations are pending).
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer: (callback, delayMs) => setTimeout(callback, Math.max(0, delayMs)).unref(),
  clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};
