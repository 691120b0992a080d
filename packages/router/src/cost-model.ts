import type { routerGroup } from './settings.js';
import type { SettingsOf } from '@kvreuse/config';
import type { SourceTier, TransferCalibration } from './calibration.js';
import type { LinkClass } from './sources.js';
import { isObject, RouterOptionError } from './errors.js';

/** Which estimate a figure came from: the settings (prior) or the receipts (calibrated). */
export type EstimateKind = 'prior' | 'calibrated';

export interface PullEstimate {
  /** Estimated prefill time the pull saves. */
  readonly savingMs: number;
  /** Estimated transfer time plus the lookup budget. */
  readonly costMs: number;
  /** Where the transfer cost came from. */
  readonly estimate: EstimateKind;
  /** Where the prefill time per token came from. */
  readonly prefillEstimate: EstimateKind;
}

export interface PullShape {
  readonly extent: number;
  readonly blockTokens: number;
  readonly tier: SourceTier;
  readonly linkClass: LinkClass;
}

/**
 * The cost model: `saving = extent × blockTokens × prefill µs per token / 1000`;
 * `cost = extent × µs per block / 1000 + lookup budget`, the µs per block being the GPU prior for a GPU
 * source, the host prior otherwise (the larger of both for a source whose blocks lie on both tiers).
 * A confident calibration replaces the priors: its fixed cost per transfer is added and its µs per block
 * used, and its measured prefill time per token replaces the prior.
 */
export function estimatePull(
  shape: PullShape,
  router: SettingsOf<[typeof routerGroup]>['router'],
  calibration: TransferCalibration | undefined,
): PullEstimate {
  if (!isObject(shape)) throw new RouterOptionError('shape', shape, 'a PullShape object');
  const { extent, blockTokens, tier, linkClass } = shape;
  if (!(Number.isSafeInteger(extent) && extent >= 0))
    throw new RouterOptionError('shape.extent', extent, 'the blocks pulled, a whole number ≥ 0');
  if (!(Number.isSafeInteger(blockTokens) && blockTokens >= 1))
    throw new RouterOptionError('shape.blockTokens', blockTokens, 'the tokens per block, a whole number ≥ 1');
  const prefill = calibration?.prefillEstimate();
  const tokenUs = prefill?.tokenUs ?? router.transferSourcePrefillTokenUs;
  const savingMs = (extent * blockTokens * tokenUs) / 1000;
  const fit = calibration?.transferEstimate(linkClass, tier);
  const priorBlockUs =
    tier === 'gpu'
      ? router.transferSourceGpuEstimatedBlockUs
      : tier === 'host'
        ? router.transferSourceEstimatedBlockUs
        : Math.max(router.transferSourceGpuEstimatedBlockUs, router.transferSourceEstimatedBlockUs);
  const transferMs = fit === undefined ? (extent * priorBlockUs) / 1000 : fit.fixedMs + (extent * fit.blockUs) / 1000;
  return {
    savingMs,
    costMs: transferMs + router.transferSourceLookupBudgetMs,
    estimate: fit === undefined ? 'prior' : 'calibrated',
    prefillEstimate: prefill === undefined ? 'prior' : 'calibrated',
  };
}
