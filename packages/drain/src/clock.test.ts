import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock } from './clock.js';

describe('systemClock', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires a timer longer than setTimeout allows (2^31 − 1 ms) at its time, not at once, and clears it', () => {
    vi.useFakeTimers();
    const delayMs = 2 ** 33;
    const fire = vi.fn();
    const cleared = vi.fn();
    systemClock.setTimer(fire, delayMs);
    const handle = systemClock.setTimer(cleared, delayMs);
    vi.advanceTimersByTime(2 ** 31);
    systemClock.clearTimer(handle);
    vi.advanceTimersByTime(delayMs - 2 ** 31 - 1);
    expect(fire).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(fire).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(delayMs);
    expect(cleared).not.toHaveBeenCalled();
  });
});
