import { describe, expect, it } from 'vitest';
import { ManualClock } from '../test/support.js';
import { TransferCalibration, type TransferReceipt } from './calibration.js';
import { CalibrationClockError, ReceiptError, RouterOptionError } from './errors.js';

const receipt = (blocks: number, transferMs: number, extra: Partial<TransferReceipt> = {}): TransferReceipt => ({
  linkClass: 'network',
  tier: 'host',
  blocks,
  bytes: blocks * 7_340_032,
  transferMs,
  ...extra,
});

// A deterministic wobble of ±4 % around the true cost.
const wobble = (i: number): number => 1 + 0.04 * Math.sin(i * 1.7);

describe('TransferCalibration', () => {
  it('converges on the fixed and per-block cost of synthetic receipts, and becomes confident at minReceipts', () => {
    const clock = new ManualClock();
    const calibration = new TransferCalibration({ now: clock.now });
    const truth = (blocks: number): number => 0.4 + blocks * 0.12;
    for (let i = 0; i < 7; i++) calibration.record(receipt(4 + ((i * 5) % 40), truth(4 + ((i * 5) % 40)) * wobble(i)));
    expect(calibration.transferEstimate('network', 'host')).toBeUndefined();
    expect(calibration.transferFit('network', 'host')?.confidence).toBe(0);
    for (let i = 7; i < 64; i++) calibration.record(receipt(4 + ((i * 5) % 40), truth(4 + ((i * 5) % 40)) * wobble(i)));
    const fit = calibration.transferEstimate('network', 'host')!;
    expect(fit.receipts).toBe(64);
    expect(fit.fixedMs).toBeCloseTo(0.4, 1);
    expect(fit.blockUs).toBeGreaterThan(115);
    expect(fit.blockUs).toBeLessThan(125);
    expect(fit.confidence).toBeGreaterThan(0.8);
  });

  it('keeps link classes and tiers apart', () => {
    const calibration = new TransferCalibration({ now: new ManualClock().now });
    for (let blocks = 1; blocks <= 8; blocks++)
      calibration.record(receipt(blocks, blocks * 0.05, { linkClass: 'same-host', tier: 'gpu' }));
    expect(calibration.transferEstimate('same-host', 'gpu')?.blockUs).toBeCloseTo(50, 6);
    expect(calibration.transferEstimate('same-host', 'host')).toBeUndefined();
    expect(calibration.transferEstimate('network', 'gpu')).toBeUndefined();
  });

  it('falls back to the priors when receipts stop: they age out against its clock', () => {
    const clock = new ManualClock();
    const calibration = new TransferCalibration({ now: clock.now, maxAgeMs: 10_000 });
    for (let blocks = 1; blocks <= 8; blocks++)
      calibration.record(receipt(blocks, 0.1 + blocks * 0.1, { prefillTokenUs: 40 }));
    clock.time = 10_000;
    expect(calibration.transferEstimate('network', 'host')).toBeDefined();
    expect(calibration.prefillEstimate()?.tokenUs).toBe(40);
    clock.time = 10_001;
    expect(calibration.transferEstimate('network', 'host')).toBeUndefined();
    expect(calibration.transferFit('network', 'host')).toBeUndefined();
    expect(calibration.prefillEstimate()).toBeUndefined();
  });

  it('is not confident in receipts that scatter past maxRelativeError', () => {
    const calibration = new TransferCalibration({ now: new ManualClock().now });
    for (let i = 0; i < 16; i++) calibration.record(receipt(8, i % 2 === 0 ? 1 : 3));
    expect(calibration.transferFit('network', 'host')?.confidence).toBe(0);
    expect(calibration.transferEstimate('network', 'host')).toBeUndefined();
  });

  it('fits through the origin when one block count is all it has, or the intercept comes out negative', () => {
    const calibration = new TransferCalibration({ now: new ManualClock().now });
    for (let i = 0; i < 8; i++) calibration.record(receipt(10, 2));
    expect(calibration.transferEstimate('network', 'host')).toMatchObject({ fixedMs: 0, blockUs: 200 });
    const negative = new TransferCalibration({ now: new ManualClock().now });
    for (let blocks = 1; blocks <= 8; blocks++) negative.record(receipt(blocks, Math.max(0.01, blocks * 0.1 - 0.05)));
    expect(negative.transferFit('network', 'host')?.fixedMs).toBe(0);
  });

  it('refuses receipts of the wrong shape whole, and options out of range', () => {
    const calibration = new TransferCalibration();
    for (const [bad, field] of [
      [{ ...receipt(1, 1), linkClass: 'moon' }, 'linkClass'],
      [{ ...receipt(1, 1), tier: 'disk' }, 'tier'],
      [receipt(0, 1), 'blocks'],
      [{ ...receipt(1, 1), bytes: -1 }, 'bytes'],
      [receipt(1, -1), 'transferMs'],
      [receipt(1, 1, { prefillTokenUs: 0 }), 'prefillTokenUs'],
    ] as const) {
      expect(() => calibration.record(bad as TransferReceipt)).toThrow(ReceiptError);
      expect(() => calibration.record(bad as TransferReceipt)).toThrow(`transfer receipt ${field} =`);
    }
    expect(calibration.transferFit('network', 'host')).toBeUndefined();
    for (const options of [
      { maxAgeMs: 0 },
      { minReceipts: 0 },
      { minReceipts: 1.5 },
      { window: 4 },
      { maxRelativeError: 0 },
      { now: 5 },
    ]) {
      expect(() => new TransferCalibration(options as never)).toThrow(RouterOptionError);
    }
  });
});

describe('TransferCalibration, when its clock misbehaves', () => {
  // A calibration on a clock the test sets, holding one receipt (2 blocks in 1 ms) read at 100 ms.
  function calibrated(): { calibration: TransferCalibration; clock: { now: () => number } } {
    const clock = { now: (): number => 100 };
    const calibration = new TransferCalibration({ now: () => clock.now(), minReceipts: 1, maxAgeMs: 10 });
    calibration.record(receipt(2, 1, { prefillTokenUs: 40 }));
    return { calibration, clock };
  }
  const oneReceipt = { fixedMs: 0, blockUs: 500, receipts: 1, confidence: 0.5 };

  it('refuses a clock that throws, naming it, with what it threw as the cause', () => {
    const { calibration, clock } = calibrated();
    const thrown = new Error('clock source gone');
    clock.now = () => {
      throw thrown;
    };
    for (const call of [() => calibration.record(receipt(4, 3)), () => calibration.transferFit('network', 'host')]) {
      expect(call).toThrow(CalibrationClockError);
      expect(call).toThrow(
        expect.objectContaining({
          code: 'INVALID_CALIBRATION_CLOCK',
          refusal: 'threw',
          cause: thrown,
          message:
            'calibration clock options.now is refused: it threw: clock source gone; the calibration is unchanged',
        }),
      );
    }
    clock.now = () => 100;
    expect(calibration.transferFit('network', 'host')).toEqual(oneReceipt);
  });

  it.each([NaN, Infinity, -Infinity, '105'])(
    'refuses a reading of %s, and the receipts still age out on the next good readings',
    (reading) => {
      const { calibration, clock } = calibrated();
      clock.now = () => reading as number;
      expect(() => calibration.record(receipt(4, 3, { prefillTokenUs: 50 }))).toThrow(
        expect.objectContaining({ code: 'INVALID_CALIBRATION_CLOCK', refusal: 'not-finite', reading }),
      );
      expect(() => calibration.prefillFit()).toThrow(CalibrationClockError);
      clock.now = () => 110;
      expect(calibration.transferFit('network', 'host')).toEqual(oneReceipt);
      expect(calibration.prefillFit()?.tokenUs).toBe(40);
      clock.now = () => 111;
      expect(calibration.transferFit('network', 'host')).toBeUndefined();
      expect(calibration.prefillFit()).toBeUndefined();
    },
  );

  it('refuses a reading less than an earlier one, so that a receipt never outlives its age behind a newer one', () => {
    const { calibration, clock } = calibrated();
    clock.now = () => 95;
    expect(() => calibration.record(receipt(4, 3))).toThrow(
      expect.objectContaining({
        code: 'INVALID_CALIBRATION_CLOCK',
        refusal: 'went-back',
        reading: 95,
        message:
          'calibration clock options.now is refused: it read 95 after 100: monotonic milliseconds never go back; the calibration is unchanged',
      }),
    );
    expect(() => calibration.transferFit('network', 'host')).toThrow(expect.objectContaining({ refusal: 'went-back' }));
    clock.now = () => 100; // standing still is fine
    expect(calibration.transferFit('network', 'host')).toEqual(oneReceipt);
  });

  it('refuses a clock that records a receipt or reads an estimate from inside its reading', () => {
    for (const callBack of [
      (calibration: TransferCalibration) => calibration.record(receipt(1, 9)),
      (calibration: TransferCalibration) => calibration.transferEstimate('network', 'host'),
      (calibration: TransferCalibration) => calibration.prefillEstimate(),
    ]) {
      const { calibration, clock } = calibrated();
      clock.now = () => {
        callBack(calibration);
        return 105;
      };
      expect(() => calibration.record(receipt(4, 3))).toThrow(
        expect.objectContaining({ code: 'INVALID_CALIBRATION_CLOCK', refusal: 're-entered', reading: undefined }),
      );
      clock.now = () => 105;
      expect(calibration.transferFit('network', 'host')).toEqual(oneReceipt);
    }
  });

  it('records nothing from a call back that the clock catches, and goes on with the reading it returns', () => {
    const { calibration, clock } = calibrated();
    const caught: unknown[] = [];
    clock.now = () => {
      try {
        calibration.record(receipt(1, 9));
      } catch (error) {
        caught.push(error);
      }
      return 105;
    };
    calibration.record(receipt(4, 2));
    expect(caught).toEqual([expect.objectContaining({ refusal: 're-entered' })]);
    clock.now = () => 105;
    expect(calibration.transferFit('network', 'host')).toMatchObject({ receipts: 2, fixedMs: 0, blockUs: 500 });
  });
});
