import { describe, expect, it } from 'vitest';
import { Scenario, settingsOf, workerOf } from '../test/support.js';
import { decide } from './decide.js';
import { lookupClock } from './lookup-clock.js';

/** Readings that move by the given steps, one pair per reading of the clock (the first pair at its making). */
function scripted(steps: readonly (readonly [wallMs: number, cpuMs: number])[]) {
  let wall = 1000;
  let cpu = 500;
  let reading = 0;
  const next = (): void => {
    const [dWall, dCpu] = steps[reading++] ?? [0, 0];
    wall += dWall;
    cpu += dCpu;
  };
  return { wallMs: () => (next(), wall), cpuMs: () => cpu };
}

describe('lookupClock', () => {
  it('starts at 0 and advances by the lesser of wall and CPU time between readings', () => {
    const clock = lookupClock(
      scripted([
        [0, 0],
        [0.5, 0.5], // working: both move
        [40, 0.1], // descheduled: the wall moves, this thread barely
        [0.2, 3], // other threads of the process worked: the CPU moves, the wall barely
      ]),
    );
    expect(clock()).toBe(0.5);
    expect(clock()).toBeCloseTo(0.6);
    expect(clock()).toBeCloseTo(0.8);
  });

  it('never goes back, whatever the readings do', () => {
    const clock = lookupClock(
      scripted([
        [0, 0],
        [-1, 2],
        [2, -1],
        [1, 1],
      ]),
    );
    expect([clock(), clock(), clock()]).toEqual([0, 0, 1]);
  });
});

describe('decide on the lookup clock', () => {
  // Two candidates: after the pair read at the clock's making, it is read at the start, after hashing,
  // after the lookup, before the second candidate and after the last.
  function decideWith(steps: readonly (readonly [number, number])[]) {
    const s = new Scenario(40, settingsOf(['--router-transfer-source-lookup-budget-ms=2']));
    for (const name of ['decode-1', 'decode-2']) s.addSource(workerOf(name), 1, { blocks: 30 });
    const context = { ...s.context(), clock: lookupClock(scripted(steps)) };
    return decide({ tokens: s.tokens, destination: { worker: s.destination, localBlocks: 0 } }, context);
  }

  it('does not charge the budget for a preemption: 50 ms of wall time with 0.3 ms of work pulls', () => {
    const decision = decideWith([
      [0, 0],
      [0, 0],
      [0.1, 0.1],
      [50, 0.1],
      [0.1, 0.1],
      [0.1, 0.1],
    ]);
    expect(decision).toMatchObject({ action: 'pull', reason: 'worth-it', candidatesConsidered: 2 });
  });

  it('still exceeds the budget when the decision itself works past it', () => {
    const decision = decideWith([
      [0, 0],
      [0, 0],
      [0.5, 0.5],
      [0.5, 0.5],
      [1.5, 1.5],
    ]);
    expect(decision).toMatchObject({ action: 'recompute', reason: 'budget-exceeded', candidatesConsidered: 1 });
  });
});
