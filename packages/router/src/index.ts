/**
 * Decode→prefill transfer-source selection: a cost model over the retained inventory that explains every decision and calibrates itself from transfer receipts.
 *
 * @packageDocumentation
 * @module \@kvreuse/router
 */
export {
  CalibrationClockError,
  type CalibrationClockRefusal,
  calibrationClockRefusals,
  PullNotStartedError,
  ReceiptError,
  RouteRequestError,
  RouterError,
  type RouterErrorCode,
  RouterOptionError,
} from './errors.js';
export {
  type DeclaredBlockHash,
  type LinkClass,
  linkClasses,
  linkClassBetween,
  linkClassOf,
  type ObserveOptions,
  publishedHost,
  SourceBook,
  type SourceBookOptions,
  type SourceHealth,
  type SourceState,
} from './sources.js';
export {
  type CalibrationOptions,
  type PrefillFit,
  type SourceTier,
  sourceTiers,
  TransferCalibration,
  type TransferFit,
  type TransferReceipt,
} from './calibration.js';
export { type EstimateKind, estimatePull, type PullEstimate, type PullShape } from './cost-model.js';
export { type PromptInput, promptChain } from './prompt-chain.js';
export {
  type CalibrationFault,
  decide,
  type DecisionReason,
  decisionReasons,
  type PrefixCut,
  type PullHint,
  type RejectedSource,
  type RejectionReason,
  rejectionReasons,
  type RouteContext,
  type RouteDecision,
  type RouteDestination,
  type RouteRequest,
} from './decide.js';
export { type LookupClockRefusal, lookupClockRefusals, type LookupFault } from './lookup-budget.js';
export { registerDefaultMetrics, RouterMetrics, type RouterMetricsOptions } from './metrics.js';
export { SavingReport, type SavingRow } from './saving-report.js';
export { routerGroup } from './settings.js';
