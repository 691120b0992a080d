import { describe, expect, it } from 'vitest';
import { Scenario, settingsOf, workerOf } from '../test/support.js';
import { decide, type RouteDecision } from './decide.js';
import { LookupBudget, type LookupClockRefusal } from './lookup-budget.js';
import { RouterMetrics } from './metrics.js';

describe('LookupBudget: decide on a lookup clock that fails', () => {
  /** A lookup clock that reads `readings` in turn, then the last of them; a function among them is called instead. */
  function scriptedClock(readings: readonly (number | (() => number))[]): () => number {
    let next = 0;
    return () => {
      const reading = readings[Math.min(next++, readings.length - 1)]!;
      return typeof reading === 'function' ? reading() : reading;
    };
  }
  const gone = (): number => {
    throw new Error('clock source gone');
  };

  /** Three host sources of 8 blocks, decided with `clock` as the lookup clock. */
  function decideWith(clock: () => number): RouteDecision {
    const s = new Scenario(16, settingsOf());
    for (let i = 0; i < 3; i++) s.addSource(workerOf(`decode-${i}`), 1, { blocks: 8, tier: 'host' });
    return decide(
      { tokens: s.tokens, destination: { worker: s.destination, localBlocks: 0 } },
      {
        ...s.context(),
        clock,
      },
    );
  }
  const failed = (considered: number, refusal: LookupClockRefusal, how: string) => {
    const fault = { refusal, detail: `the lookup clock (context.clock) failed, ${how}` };
    return {
      action: 'recompute',
      reason: 'budget-exceeded',
      extent: 0,
      candidatesConsidered: considered,
      detail: `${fault.detail}: no source, the prefix is recomputed`,
      lookupFault: fault,
    };
  };

  it('ends the decision as budget-exceeded when the clock throws, saying so, where it threw', () => {
    // Readings: the start, after hashing, after the lookup, before the second and third candidates, after the last.
    expect(decideWith(gone)).toMatchObject(failed(0, 'threw', 'it threw: clock source gone'));
    expect(decideWith(scriptedClock([0, 0, 0, gone]))).toMatchObject(failed(1, 'threw', 'it threw: clock source gone'));
    expect(decideWith(scriptedClock([0, 0, 0, 0, 0, gone]))).toMatchObject(
      failed(3, 'threw', 'it threw: clock source gone'),
    );
  });

  it('ends the decision as budget-exceeded when the clock reads no finite number or goes back', () => {
    expect(decideWith(() => Number.NaN)).toMatchObject(
      failed(0, 'not-finite', 'it read NaN, not a finite number of milliseconds'),
    );
    expect(decideWith(scriptedClock([0, 0, Number.POSITIVE_INFINITY]))).toMatchObject(
      failed(3, 'not-finite', 'it read Infinity, not a finite number of milliseconds'),
    );
    expect(decideWith(scriptedClock([0, 0, 0, '1' as never]))).toMatchObject(
      failed(1, 'not-finite', 'it read "1", not a finite number of milliseconds'),
    );
    expect(decideWith(scriptedClock([5, 5, 4]))).toMatchObject(failed(3, 'went-back', 'it went back from 5 to 4 ms'));
  });

  /**
   * A clock that reads 0, and on its `nth` reading (1: the first) first calls back into decide with itself,
   * keeping that decision in `nested`, then returns 0, or throws when `thenThrows`.
   */
  function callingBack(nth: number, thenThrows = false) {
    let readings = 0;
    const calledBack: { nested?: RouteDecision; clock: () => number } = {
      clock: () => {
        if (++readings === nth) {
          calledBack.nested = decideWith(calledBack.clock);
          if (thenThrows) throw new Error('clock source gone');
        }
        return 0;
      },
    };
    return calledBack;
  }

  it('ends the decision as budget-exceeded when the clock calls back into decide, and the decision it started', () => {
    const reentered = (considered: number) =>
      failed(considered, 're-entered', 'it called back into decide while being read');
    const atStart = callingBack(1);
    expect(decideWith(atStart.clock)).toMatchObject(reentered(0));
    expect(atStart.nested).toMatchObject(reentered(0));

    const beforeSecondCandidate = callingBack(4);
    expect(decideWith(beforeSecondCandidate.clock)).toMatchObject(reentered(1));
    expect(beforeSecondCandidate.nested).toMatchObject(reentered(0));

    const thenThrew = callingBack(1, true);
    expect(decideWith(thenThrew.clock)).toMatchObject(reentered(0));
    expect(thenThrew.nested).toMatchObject(reentered(0));

    const afterward = decideWith(scriptedClock([0]));
    expect(afterward).toMatchObject({ action: 'pull', reason: 'worth-it' });
    expect(afterward).not.toHaveProperty('lookupFault');
  });

  it('ends the decision as budget-exceeded when the clock calls back into another installed copy of the package', async () => {
    // The query makes this a module of its own: a second copy of the package, as npm may install.
    const secondCopySpecifier = './lookup-budget.ts?second-installed-copy';
    const secondCopy = (await import(/* @vite-ignore */ secondCopySpecifier)) as typeof import('./lookup-budget.js');
    expect(secondCopy.LookupBudget).not.toBe(LookupBudget);
    let nested: InstanceType<typeof LookupBudget> | undefined;
    const budget = new LookupBudget(() => {
      nested = new secondCopy.LookupBudget(() => 0, 1);
      return 0;
    }, 1);
    const reentered = {
      refusal: 're-entered',
      detail: 'the lookup clock (context.clock) failed, it called back into decide while being read',
    };
    expect(budget.fault).toEqual(reentered);
    expect(nested?.fault).toEqual(reentered);
    expect(new secondCopy.LookupBudget(() => 0, 1).fault).toBeUndefined();
  });

  it('is counted by RouterMetrics by how the clock failed', async () => {
    const metrics = new RouterMetrics();
    metrics.decided(decideWith(gone));
    metrics.decided(decideWith(scriptedClock([5, 5, 4])));
    metrics.decided(decideWith(scriptedClock([0, 0, 100])));
    metrics.decided(decideWith(callingBack(1).clock));
    const text = await metrics.text();
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="threw"} 1\n');
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="went-back"} 1\n');
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="re-entered"} 1\n');
    expect(text).toContain('kvreuse_route_lookup_clock_refusals_total{refusal="not-finite"} 0\n');
    expect(text).toContain('kvreuse_route_decisions_total{action="recompute",reason="budget-exceeded"} 4\n');
  });

  it('pulls when the same clock works, and names no lookup fault when the budget is spent in time', () => {
    const pulled = decideWith(scriptedClock([0]));
    expect(pulled).toMatchObject({ action: 'pull', reason: 'worth-it' });
    expect(pulled).not.toHaveProperty('lookupFault');
    const late = decideWith(scriptedClock([0, 0, 100]));
    expect(late).toMatchObject({ reason: 'budget-exceeded', detail: expect.stringMatching(/took longer than/) });
    expect(late).not.toHaveProperty('lookupFault');
  });
});
