// What a destination rank's `ReuseEndpoint.pull` is asked to do: the router's decision, where the
// blocks go here, and how to verify and what to do with a shortfall.
import type { PullHint } from '@kvreuse/router';
import type { BeforeRelease } from './pins.js';

/** How a pull checks what arrived: every block, every `sampleEvery`-th and the last, or none. */
export const verifyModes = ['full', 'sampled', 'off'] as const;
export type VerifyMode = (typeof verifyModes)[number];
export type ShortfallPolicy = 'fail' | 'recompute';

/** The router's prediction for this pull, to compare with what it measured. */
export interface SavingPrediction {
  /** `savingMs − costMs` of the router's decision. */
  readonly predictedMs: number;
  readonly blockTokens: number;
  /** Prefill time per token (measured at the destination, or the router's prior). */
  readonly prefillTokenUs: number;
  /** The router's lookup budget (`router.transferSourceLookupBudgetMs`). */
  readonly lookupBudgetMs: number;
}

export interface PullRequest {
  /**
   * The router's pull hint (`RouteDecision.source`): the source worker, its incarnation and epoch,
   * the positions and block hashes of the prefix in order, its tier and link class. The endpoint finds
   * the source's ranks in discovery (their rank parts as published) and refuses a source that is not
   * ready there under exactly that incarnation and epoch.
   */
  readonly hint: PullHint;
  /** Where each block of the prefix goes in this rank's banks, in prefix order: one per hinted block. */
  readonly destinationBlocks: Uint32Array;
  /**
   * Per-block verification: `full` checks every block, `sampled` every `sampleEvery`-th and the last, `off`
   * none. Default: the `endpoint.verify` setting (`full` without it). The receipt's `verify` says which ran.
   */
  readonly verify?: VerifyMode;
  readonly sampleEvery?: number;
  /** What a shortfall gives: `fail` throws `PullShortfallError`, `recompute` returns the receipt. Default: the `drain.failedLoadPolicy` setting. */
  readonly policy?: ShortfallPolicy;
  /** The router's predicted saving, for the receipt's comparison. */
  readonly prediction?: SavingPrediction;
  /** Aborting before the posts refuses the pull (pins already taken are released); after, the posts run to quiescence. */
  readonly signal?: AbortSignal;
  /**
   * Called with the pins this pull holds once nothing reads their blocks (after a refusal or shortfall
   * too), before it releases them: until it settles the sources keep the blocks, and a source's drain
   * waits for these pins. E.g. a reader that copies the blocks on before the source may reuse them. The
   * pull does not wait for it (`ReuseEndpoint.pinsReleased()` does, as do `drain()` and `close()`); a
   * rejection is a process warning, the pins are released all the same.
   */
  readonly beforeRelease?: BeforeRelease;
}
