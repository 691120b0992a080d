import { describe, expect, it } from 'vitest';
import { ManualClock, settingsOf } from '../test/support.js';
import { TransferCalibration } from './calibration.js';
import { estimatePull } from './cost-model.js';
import { RouterOptionError } from './errors.js';

const router = settingsOf([
  '--router-transfer-source-prefill-token-us=62.5',
  '--router-transfer-source-estimated-block-us=500',
  '--router-transfer-source-gpu-estimated-block-us=250',
  '--router-transfer-source-lookup-budget-ms=1',
]).router;

describe('estimatePull', () => {
  it.each([
    ['host', 10, 5 + 1],
    ['gpu', 10, 2.5 + 1],
    ['mixed', 10, 5 + 1],
  ] as const)('prices %s blocks at the prior: %i blocks cost %f ms', (tier, extent, costMs) => {
    expect(estimatePull({ extent, blockTokens: 64, tier, linkClass: 'network' }, router, undefined)).toEqual({
      savingMs: 40,
      costMs,
      estimate: 'prior',
      prefillEstimate: 'prior',
    });
  });

  it('prices a mixed prefix at the slower tier even when GPU blocks are the dearer ones', () => {
    const dearGpu = { ...router, transferSourceGpuEstimatedBlockUs: 750 };
    expect(
      estimatePull({ extent: 4, blockTokens: 64, tier: 'mixed', linkClass: 'network' }, dearGpu, undefined).costMs,
    ).toBe(4);
  });

  it('a receipt moves the estimate to what it measured: 42 blocks of 7.3 MB priced at the prior, then at the pull', () => {
    const calibration = new TransferCalibration({ now: new ManualClock().now, minReceipts: 1 });
    const shape = { extent: 42, blockTokens: 64, tier: 'host', linkClass: 'same-host' } as const;
    const prior = estimatePull(shape, router, calibration);
    expect(prior).toMatchObject({ estimate: 'prior', costMs: 42 * 0.5 + 1 });
    // The pull took 31.5 ms, 750 µs a block, where the prior said 500.
    calibration.record({ linkClass: 'same-host', tier: 'host', blocks: 42, bytes: 42 * 7_340_032, transferMs: 31.5 });
    const calibrated = estimatePull(shape, router, calibration);
    expect(calibrated.estimate).toBe('calibrated');
    expect(calibrated.costMs).toBeCloseTo(31.5 + 1, 9);
    // The same receipt under the default minReceipts (8) is not trusted yet: the prior still prices it.
    const cautious = new TransferCalibration({ now: new ManualClock().now });
    cautious.record({ linkClass: 'same-host', tier: 'host', blocks: 42, bytes: 42 * 7_340_032, transferMs: 31.5 });
    expect(estimatePull(shape, router, cautious)).toEqual(prior);
  });

  it('uses the confident calibration: its fixed cost, its µs per block and the measured prefill time', () => {
    const calibration = new TransferCalibration({ now: new ManualClock().now });
    for (let blocks = 1; blocks <= 8; blocks++)
      calibration.record({
        linkClass: 'same-host',
        tier: 'host',
        blocks,
        bytes: 1,
        transferMs: 0.5 + blocks * 0.25,
        prefillTokenUs: 25,
      });
    const estimate = estimatePull(
      { extent: 10, blockTokens: 64, tier: 'host', linkClass: 'same-host' },
      router,
      calibration,
    );
    expect(estimate.estimate).toBe('calibrated');
    expect(estimate.prefillEstimate).toBe('calibrated');
    expect(estimate.costMs).toBeCloseTo(0.5 + 2.5 + 1, 9);
    expect(estimate.savingMs).toBeCloseTo(16, 9);
    // Another link class has no receipts: its prior.
    expect(
      estimatePull({ extent: 10, blockTokens: 64, tier: 'host', linkClass: 'network' }, router, calibration).estimate,
    ).toBe('prior');
  });

  it('refuses a shape that is no object, and an extent or block size that is no whole number', () => {
    expect(() => estimatePull(null as never, router, undefined)).toThrow(/router option shape = null/);
    const shape = { extent: 10, blockTokens: 64, tier: 'host', linkClass: 'network' } as const;
    for (const extent of [Number.NaN, -1, 1.5]) {
      expect(() => estimatePull({ ...shape, extent }, router, undefined)).toThrow(RouterOptionError);
      expect(() => estimatePull({ ...shape, extent }, router, undefined)).toThrow(/shape\.extent/);
    }
    expect(() => estimatePull({ ...shape, blockTokens: 0 }, router, undefined)).toThrow(/shape\.blockTokens/);
  });
});
