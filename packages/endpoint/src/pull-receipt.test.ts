import { describe, expect, it } from 'vitest';
import { calibrationSample, type PullReceipt, type RecomputeReason } from './pull-receipt.js';

const receipt = (blocks: number, reasons: RecomputeReason[]): PullReceipt => ({
  requested: 8,
  blocks,
  bytes: blocks * 1024,
  bytesMoved: 8 * 1024,
  ms: 2,
  phases: { pinMs: 1, verifyMs: 0.5, releaseMs: 0.2 },
  gbytesPerS: 0.004,
  verify: 'full',
  checkedBlocks: blocks,
  recomputed: { fromBlock: blocks, blocks: 8 - blocks, reasons },
  calibration: { linkClass: 'same-host', tier: 'host', blocks, bytes: blocks * 1024, transferMs: 2 },
});
const sourceRank = { tpRank: 1, ppRank: 0 };

describe('calibrationSample', () => {
  it('is the receipt’s calibration input when every committed block was moved in the time it measured', () => {
    const whole = receipt(8, []);
    expect(calibrationSample(whole)).toBe(whole.calibration);
    const fewer = receipt(5, [{ kind: 'pin-granted-fewer', fromBlock: 5, sourceRank, granted: 5 }]);
    expect(calibrationSample(fewer)).toBe(fewer.calibration);
  });

  it('is undefined when nothing was committed, or the time is that of a failed, cut or mismatched pull', () => {
    expect(
      calibrationSample(
        receipt(0, [{ kind: 'pin-refused', fromBlock: 0, sourceRank, reason: 'evicted', detail: 'gone' }]),
      ),
    ).toBeUndefined();
    expect(
      calibrationSample(receipt(3, [{ kind: 'checksum-mismatch', fromBlock: 3, pair: 0, expected: 1, actual: 2 }])),
    ).toBeUndefined();
    expect(
      calibrationSample(
        receipt(0, [
          { kind: 'operation-failed', fromBlock: 0, pair: 1, code: 'REMOTE_DISCONNECT', detail: 'peer gone' },
        ]),
      ),
    ).toBeUndefined();
  });
});
