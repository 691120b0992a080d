import { describe, expect, it } from 'vitest';
import { drainRow, pullSummary, type DemoSummary, summaryLine } from './demo-summary.js';

describe('the demo summary', () => {
  it('takes the pull report and each drain as the summary shows them', () => {
    expect(
      pullSummary({
        memory: 'vram',
        requested: 42,
        blocks: 42,
        bytes: 308_281_344,
        verified: true,
        verify: 'sampled',
        checkedBlocks: 7,
        ms: 80,
        gbitPerS: 30.8,
        recomputed: { blocks: 0, reasons: [] },
        saving: { predictedMs: 128.2, measuredMs: 52.4 },
      }),
    ).toEqual({
      memory: 'vram',
      blocks: 42,
      bytes: 308_281_344,
      verified: true,
      verify: 'sampled',
      checkedBlocks: 7,
      ms: 80,
      gbitPerS: 30.8,
      recomputedBlocks: 0,
      savingMs: { predicted: 128.2, measured: 52.4 },
    });
    expect(drainRow({ process: 'd/tp1', pid: 9, exitCode: null, signal: 'SIGKILL' })).toEqual({
      process: 'd/tp1',
      exitCode: null,
      signal: 'SIGKILL',
      banksReturned: null,
      banksRetained: null,
      pins: null,
    });
  });

  const priors: DemoSummary['priors'] = {
    blockUs: { value: 35_000, source: 'measured', detail: "turn 1's hand-off" },
    prefillTokenUs: { value: 50, source: 'settings', detail: 'router.transfer_source_prefill_token_us' },
  };

  it('says it all in one line', () => {
    const pins = {
      waitedFor: 1,
      released: 1,
      lapsed: 0,
      outstanding: 0,
      held: [{ reader: 'p-tp0', blocks: 42, ended: 'released' }],
    };
    const none = { waitedFor: 0, released: 0, lapsed: 0, outstanding: 0, held: [] };
    const summary: DemoSummary = {
      handOff: { blocks: 40, bytes: 293_601_280, ms: 1400 },
      priors,
      decisions: [
        {
          request: 'turn 2',
          action: 'pull',
          reason: 'worth-it',
          detail: '',
          blocks: 42,
          savingMs: 134.4,
          costMs: 6.2,
          rejected: [],
        },
        {
          request: 'short request',
          action: 'recompute',
          reason: 'too-short',
          detail: '',
          blocks: 2,
          savingMs: 6.4,
          costMs: 2.2,
          rejected: [],
        },
      ],
      pull: {
        memory: 'dram',
        blocks: 42,
        bytes: 308_281_344,
        verified: true,
        verify: 'full',
        checkedBlocks: 42,
        ms: 79.56,
        gbitPerS: 31,
        recomputedBlocks: 0,
        savingMs: { predicted: 128.2, measured: 52.8 },
      },
      calibration: {
        blocks: 42,
        transferMs: { prior: 4.2, measured: 79.56, calibrated: 79.56 },
        decision: {
          request: 'turn 2, calibrated',
          action: 'pull',
          reason: 'worth-it',
          detail: '',
          blocks: 42,
          savingMs: 134.4,
          costMs: 81.56,
          rejected: [],
        },
      },
      gpu: { active: false, mode: 'host-only', reason: 'no vram' },
      killedRank: {
        process: 'd/tp1',
        signal: 'SIGKILL',
        recomputed: 42,
        committedBlocks: 0,
        verified: true,
        reasons: [],
      },
      drain: [
        { process: 'd/tp0', exitCode: 0, signal: null, banksReturned: 56, banksRetained: 0, pins },
        { process: 'd/tp1', exitCode: null, signal: 'SIGKILL', banksReturned: null, banksRetained: null, pins: null },
        { process: 'p/tp0', exitCode: 0, signal: null, banksReturned: 56, banksRetained: 0, pins: none },
      ],
    };
    expect(summaryLine(summary)).toBe(
      'kvreuse demo: pulled 42 blocks (308,281,344 bytes, verified) in 79.6 ms at 31.00 Gbit/s; turn 2 pull (worth-it), short request recompute (too-short); ' +
        'transfer estimate 4.2 ms (prior) → 79.6 ms (calibrated, measured 79.6 ms); gpu reuse refused; killed rank: 42 blocks recomputed, 0 committed; 2 processes drained, 112 banks returned, 0 retained, 1 pin waited for (1 released)',
    );
  });
});
