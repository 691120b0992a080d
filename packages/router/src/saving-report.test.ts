import { describe, expect, it } from 'vitest';
import { Scenario, settingsOf, workerOf } from '../test/support.js';
import { decide } from './decide.js';
import { ReceiptError, RouterOptionError } from './errors.js';
import { SavingReport } from './saving-report.js';

const flags = [
  '--router-transfer-source-prefill-token-us=62.5',
  '--router-transfer-source-estimated-block-us=500',
  '--router-transfer-source-lookup-budget-ms=1',
];

describe('SavingReport', () => {
  const s = new Scenario(16, settingsOf(flags));
  s.addSource(workerOf('decode-1'), 1, { blocks: 8 });
  const pullDecision = decide(
    { tokens: s.tokens, destination: { worker: s.destination, localBlocks: 0 } },
    s.context(),
  );

  it('sets the predicted net saving against the measured one, per pull', () => {
    const report = new SavingReport(s.settings.router);
    // Predicted: 32 − 5 = 27. Measured: 8 blocks at 50 µs per token = 25.6, minus 3 ms transfer, minus the 1 ms budget.
    expect(
      report.add(pullDecision, {
        linkClass: 'network',
        tier: 'host',
        blocks: 8,
        bytes: 1,
        transferMs: 3,
        prefillTokenUs: 50,
      }),
    ).toEqual({
      source: 'decode-1',
      extent: 8,
      blocksMoved: 8,
      estimate: 'prior',
      predictedMs: 27,
      measuredMs: 25.6 - 3 - 1,
    });
    // Only 4 blocks verified; no measured prefill time: the prior's 4 ms per block.
    expect(
      report.add(pullDecision, { linkClass: 'network', tier: 'host', blocks: 4, bytes: 1, transferMs: 1 }).measuredMs,
    ).toBe(14);
    expect(report.render()).toBe(
      [
        'source | extent | moved | estimate | predicted ms | measured ms | error ms',
        'decode-1 | 8 | 8 | prior | 27.000 | 21.600 | 5.400',
        'decode-1 | 8 | 4 | prior | 27.000 | 14.000 | 13.000',
        '2 pulls, mean absolute error 9.200 ms',
        '',
      ].join('\n'),
    );
    expect(report.rows()).toHaveLength(2);
  });

  it('refuses a recompute decision and a receipt of more blocks than the extent', () => {
    const report = new SavingReport(s.settings.router);
    const recompute = decide(
      { tokens: s.tokens, destination: { worker: s.destination, localBlocks: 16 } },
      s.context(),
    );
    expect(() =>
      report.add(recompute, { linkClass: 'network', tier: 'host', blocks: 1, bytes: 1, transferMs: 1 }),
    ).toThrow(RouterOptionError);
    expect(() =>
      report.add(pullDecision, { linkClass: 'network', tier: 'host', blocks: 9, bytes: 1, transferMs: 1 }),
    ).toThrow(ReceiptError);
    expect(report.rows()).toEqual([]);
  });

  it('refuses a decision that is no object', () => {
    const report = new SavingReport(s.settings.router);
    const receipt = { linkClass: 'network', tier: 'host', blocks: 1, bytes: 1, transferMs: 1 } as const;
    expect(() => report.add(null as never, receipt)).toThrow(RouterOptionError);
    expect(() => report.add(null as never, receipt)).toThrow(/router option decision = null/);
    expect(report.rows()).toEqual([]);
  });

  it('refuses a measured prefill time per token that calibration would refuse, adding no row', () => {
    const report = new SavingReport(s.settings.router);
    for (const prefillTokenUs of [Number.NaN, -50, 0, Number.POSITIVE_INFINITY, '50']) {
      const receipt = {
        linkClass: 'network',
        tier: 'host',
        blocks: 8,
        bytes: 1,
        transferMs: 3,
        prefillTokenUs,
      } as const;
      expect(() => report.add(pullDecision, receipt as never), String(prefillTokenUs)).toThrow(
        expect.objectContaining({ code: 'INVALID_RECEIPT', field: 'prefillTokenUs' }),
      );
    }
    expect(report.rows()).toEqual([]);
  });
});
