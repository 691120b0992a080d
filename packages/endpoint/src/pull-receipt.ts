// What a pull reports: the verified prefix it committed, what is left to recompute and why, and the
// figures the router calibrates on.
import type { RankId } from '@kvreuse/descriptors';
import type { TransferReceipt } from '@kvreuse/router';
import { EndpointError } from './errors.js';
import type { VerifyMode } from './pull-request.js';
import type { PinLossReason } from './pins.js';

/** Why blocks from `fromBlock` on (positions in the requested prefix) must be recomputed. */
export type RecomputeReason =
  | {
      readonly kind: 'pin-granted-fewer';
      readonly fromBlock: number;
      readonly sourceRank: RankId;
      readonly granted: number;
    }
  /**
   * `reason`: the source's refusal (`evicted`, `shutting-down`, `stale-epoch`, …), `source-unresponsive` when the
   * heartbeat found its agent unresponsive before it answered, or the error code when it did not answer (`PIN_TIMEOUT`).
   */
  | {
      readonly kind: 'pin-refused';
      readonly fromBlock: number;
      readonly sourceRank: RankId;
      readonly reason: string;
      readonly detail: string;
    }
  | {
      readonly kind: 'pin-lost';
      readonly fromBlock: number;
      readonly sourceRank: RankId;
      readonly reason: PinLossReason;
      readonly detail: string;
    }
  /** `code`: the native code of a failed post or operation (`REMOTE_DISCONNECT`, …), or `OPERATION_TIMED_OUT`. */
  | {
      readonly kind: 'operation-failed';
      readonly fromBlock: number;
      readonly pair: number;
      readonly code: string;
      readonly detail: string;
    }
  | {
      readonly kind: 'checksum-mismatch';
      readonly fromBlock: number;
      readonly pair: number;
      readonly expected: number;
      readonly actual: number;
    };

/**
 * A pull's time beside its transfer (`ms`), in milliseconds of the endpoint's clock. `pinMs`: from the pin
 * requests to the last source's answer — a source asked for checksums computes them before it answers —
 * (absent for `pullPrefix`, whose pins come held). `verifyMs`: summing what arrived and comparing it with
 * the sources' checksums. `releaseMs`: waiting, once verified, for the sources to take the pins back (0 when
 * the pull does not wait — `ReuseEndpoint.pull`, `PullOptions.onReleasing` — or a quarantined read keeps
 * them: they are released when it ends).
 */
export interface PullPhases {
  readonly pinMs?: number;
  readonly verifyMs: number;
  readonly releaseMs: number;
}

/** The router's predicted saving for this pull against what the receipt measured (the same formula as the router's `SavingReport`). */
export interface SavingComparison {
  readonly predictedMs: number;
  readonly measuredMs: number;
}

export interface PullReceipt {
  /** Blocks asked for. */
  readonly requested: number;
  /** The verified prefix the destination may commit: blocks `0 … blocks − 1`. */
  readonly blocks: number;
  /** Bytes of the committed prefix (all rank pairs). */
  readonly bytes: number;
  /** Bytes the operations reported moved, committed or not. */
  readonly bytesMoved: number;
  /** Milliseconds from the first post to the last operation's quiescence (the endpoint's clock for `ReuseEndpoint.pull`). */
  readonly ms: number;
  /** Where the rest of the pull's time went (`PullPhases`). */
  readonly phases: PullPhases;
  /** `bytesMoved` over `ms`, in GB/s (10⁹ bytes per second); 0 when nothing was posted. */
  readonly gbytesPerS: number;
  /** The verification that ran: the request's, or the endpoint's default (`endpoint.verify`). */
  readonly verify: VerifyMode;
  /** Blocks whose checksums were compared on every pair (all of the prefix under `full`, none under `off`). */
  readonly checkedBlocks: number;
  /** Blocks `blocks … requested − 1`, to be recomputed, and every reason found (ordered by `fromBlock`). */
  readonly recomputed: {
    readonly fromBlock: number;
    readonly blocks: number;
    readonly reasons: readonly RecomputeReason[];
  };
  /** The router's calibration input (`TransferCalibration.record`, `SavingReport.add`). */
  readonly calibration: TransferReceipt;
  readonly saving?: SavingComparison;
}

/**
 * The receipt's calibration input when its time prices the blocks it committed, else undefined: nothing
 * was committed, or a read failed, a pin was lost or a block did not verify (then the time is that of
 * another pull than the one counted). A pin granted fewer blocks still prices the blocks it moved.
 */
export function calibrationSample(receipt: PullReceipt): TransferReceipt | undefined {
  return receipt.blocks > 0 && receipt.recomputed.reasons.every((reason) => reason.kind === 'pin-granted-fewer')
    ? receipt.calibration
    : undefined;
}

/**
 * A pull under the `fail` policy verified fewer blocks than it asked for. The pins were released
 * (or will be, once a quarantined operation turns quiescent); `receipt` says what verified and why the rest did not.
 */
export class PullShortfallError extends EndpointError {
  readonly code = 'PULL_SHORTFALL';
  constructor(readonly receipt: PullReceipt) {
    const first = receipt.recomputed.reasons[0];
    super(
      `pull verified ${receipt.blocks} of ${receipt.requested} blocks${first === undefined ? '' : `: ${first.kind} at block ${first.fromBlock}`}`,
    );
  }
}
