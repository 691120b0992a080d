import { describe, expect, it } from 'vitest';
import { ManualClock } from '../test/support/manual-clock.js';
import { DeadlineScheduler } from './deadline-scheduler.js';

describe('DeadlineScheduler', () => {
  it('refuses a missing or malformed clock, a NaN time and a missing callback', () => {
    const refused = (option: string) => expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option });
    expect(() => new DeadlineScheduler(undefined as never)).toThrow(refused('clock'));
    expect(() => new DeadlineScheduler({ now: () => 0 } as never)).toThrow(refused('clock.setTimer'));
    const scheduler = new DeadlineScheduler(new ManualClock());
    expect(() => scheduler.schedule(Number.NaN, () => {})).toThrow('at = NaN is refused');
    expect(() => scheduler.schedule(1, undefined as never)).toThrow(refused('fire'));
    expect(scheduler.size).toBe(0);
  });

  it('refuses a time that is not finite, naming it, and arms no timer', () => {
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    for (const at of [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])
      expect(() => scheduler.schedule(at, () => {})).toThrow(
        expect.objectContaining({
          code: 'INVALID_DRAIN_OPTION',
          message: `at = ${at} is refused: must be a finite clock time in milliseconds`,
        }),
      );
    expect(scheduler.size).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('fires deadlines in time order, then scheduling order, on one timer', () => {
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    const fired: string[] = [];
    for (const [name, at] of [
      ['c', 30],
      ['a', 10],
      ['b', 20],
      ['a2', 10],
    ] as const)
      scheduler.schedule(at, () => fired.push(name));
    expect(clock.pending).toBe(1);
    expect(scheduler.size).toBe(4);
    clock.advance(15);
    expect(fired).toEqual(['a', 'a2']);
    expect(clock.pending).toBe(1);
    clock.advance(100);
    expect(fired).toEqual(['a', 'a2', 'b', 'c']);
    expect(scheduler.size).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('still fires the later deadlines when a callback throws', () => {
    const fired: string[] = [];
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    const breaks = () => {
      fired.push('a');
      throw new Error('a broke');
    };
    scheduler.schedule(10, breaks);
    scheduler.schedule(10, () => fired.push('b'));
    scheduler.schedule(20, () => fired.push('c'));
    expect(() => clock.advance(10)).toThrow('a broke');
    expect(scheduler.size).toBe(2);
    clock.advance(10);
    expect(fired).toEqual(['a', 'b', 'c']);
    expect(scheduler.size).toBe(0);
  });

  it('calls one shared callback with the subject each deadline was scheduled for', () => {
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    const fired: string[] = [];
    const fire = (subject: { name: string }) => fired.push(subject.name);
    scheduler.schedule(20, fire, { name: 'second' });
    scheduler.schedule(10, fire, { name: 'first' });
    clock.advance(30);
    expect(fired).toEqual(['first', 'second']);
  });

  it('skips cancelled deadlines and disarms when none is left', () => {
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    const fired: number[] = [];
    const first = scheduler.schedule(5, () => fired.push(5));
    const second = scheduler.schedule(8, () => fired.push(8));
    first.cancel();
    first.cancel();
    expect(scheduler.size).toBe(1);
    expect(scheduler.nextAt).toBe(8);
    second.cancel();
    expect(clock.pending).toBe(0);
    clock.advance(10);
    expect(fired).toEqual([]);
  });

  it('lets a firing deadline schedule another one, which fires in the same run when due', () => {
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    const fired: string[] = [];
    scheduler.schedule(10, () => {
      fired.push('timeout');
      scheduler.schedule(25, () => fired.push('abandon'));
    });
    clock.advance(10);
    expect(fired).toEqual(['timeout']);
    clock.advance(20);
    expect(fired).toEqual(['timeout', 'abandon']);
  });

  it('keeps 10,000 deadlines on a single armed timer and fires them all in order', () => {
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    const times = Array.from({ length: 10_000 }, (_, i) => (i * 7919) % 10_007);
    const fired: number[] = [];
    for (const at of times) scheduler.schedule(at, () => fired.push(at));
    expect(clock.pending).toBe(1);
    clock.advance(20_000);
    expect(fired).toEqual([...times].sort((a, b) => a - b));
  });

  it('clear() drops everything; a cancel of a cleared deadline does not touch later ones', () => {
    const clock = new ManualClock();
    const scheduler = new DeadlineScheduler(clock);
    const cleared = scheduler.schedule(1, () => {
      throw new Error('must not fire');
    });
    scheduler.clear();
    expect(scheduler.size).toBe(0);
    expect(clock.pending).toBe(0);
    const fired: number[] = [];
    scheduler.schedule(3, () => fired.push(3));
    cleared.cancel();
    expect(scheduler.size).toBe(1);
    clock.advance(5);
    expect(fired).toEqual([3]);
  });
});
