import { describe, expect, it } from 'vitest';
import { InvalidDrainOptionError, LoadFailedError, OperationTimedOutError } from './errors.js';
import type { Quiescence } from './ledger.js';
import { decideLoad, type LoadPart } from './load-policy.js';

const quiet: Quiescence = { terminal: 'done', bytesDone: 1, late: false, quarantined: false };
const ok = (blocks: number): LoadPart => ({ blocks, outcome: { ok: true, bytesDone: blocks }, quiescence: quiet });
const timedOut = (blocks: number, quiescence: Quiescence | undefined): LoadPart => ({
  blocks,
  outcome: {
    ok: false,
    error: new OperationTimedOutError('reader#7', 'decode-0', 1000, 'transport.operationTimeoutMs'),
  },
  quiescence,
});
const all = () => true;

describe('decideLoad', () => {
  it('is complete only when every part succeeded, is quiescent and every block verifies', () => {
    expect(decideLoad({ policy: 'recompute', parts: [ok(2), ok(3)], verify: all })).toEqual({
      kind: 'complete',
      commit: 5,
      recompute: 0,
    });
  });

  it('commits only the longest verified prefix under recompute', () => {
    const decision = decideLoad({ policy: 'recompute', parts: [ok(2), ok(3)], verify: (index) => index !== 3 });
    expect(decision).toEqual({ kind: 'partial', commit: 3, recompute: 2, reason: 'block 3 did not verify' });
  });

  it('never counts a late success: a timed-out part ends the prefix even if its bytes arrived', () => {
    const late: Quiescence = { ...quiet, late: true };
    const decision = decideLoad({ policy: 'recompute', parts: [ok(2), timedOut(2, late), ok(1)], verify: all });
    expect(decision).toMatchObject({ kind: 'partial', commit: 2, recompute: 3 });
    expect(decision.kind === 'partial' && decision.reason).toMatch(
      /part 1 failed: operation reader#7 with peer decode-0 was not complete/,
    );
  });

  it('never reads memory of a part that is not quiescent', () => {
    const verified: number[] = [];
    const decision = decideLoad({
      policy: 'recompute',
      parts: [ok(1), { ...ok(2), quiescence: undefined }],
      verify: (index) => {
        verified.push(index);
        return true;
      },
    });
    expect(decision).toMatchObject({
      kind: 'partial',
      commit: 1,
      recompute: 2,
      reason: 'part 1 is not quiescent, so its memory cannot be read',
    });
    expect(verified).toEqual([0]);
  });

  it('fails the load under fail, naming the valid prefix', () => {
    const decision = decideLoad({ policy: 'fail', parts: [ok(4)], verify: (index) => index < 2 });
    expect(decision.kind).toBe('failed');
    if (decision.kind !== 'failed') return;
    expect(decision.commit).toBe(0);
    expect(decision.recompute).toBe(4);
    expect(decision.error).toBeInstanceOf(LoadFailedError);
    expect(decision.error).toMatchObject({ code: 'LOAD_FAILED', blocks: 4, validPrefix: 2 });
    expect(decision.error.message).toContain('drain.failedLoadPolicy = "fail"');
  });

  it('refuses an unknown policy and empty parts', () => {
    expect(() => decideLoad({ policy: 'retry' as 'fail', parts: [], verify: all })).toThrow(InvalidDrainOptionError);
    expect(() => decideLoad({ policy: 'fail', parts: [ok(0)], verify: all })).toThrow(/parts\[0\]\.blocks = 0/);
    expect(() => decideLoad(undefined as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'input' }),
    );
    expect(() => decideLoad({ policy: 'fail', verify: all } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'parts' }),
    );
    expect(() => decideLoad({ policy: 'fail', parts: [] } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'verify' }),
    );
    expect(() => decideLoad({ policy: 'fail', parts: [null], verify: all } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option: 'parts[0]' }),
    );
  });

  it("refuses a part whose outcome or quiescence is not the ledger's, naming it", () => {
    const refused = (option: string) => expect.objectContaining({ code: 'INVALID_DRAIN_OPTION', option });
    for (const outcome of [undefined, { ok: 'yes' }, { ok: false }, { ok: false, error: 'timed out' }])
      expect(() =>
        decideLoad({ policy: 'recompute', parts: [ok(1), { ...ok(1), outcome } as never], verify: all }),
      ).toThrow(refused('parts[1].outcome'));
    expect(() =>
      decideLoad({ policy: 'recompute', parts: [{ ...ok(1), quiescence: 'done' as never }], verify: all }),
    ).toThrow(refused('parts[0].quiescence'));
  });
});
