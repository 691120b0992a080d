export { EndpointError, type EndpointErrorCode, EndpointOptionError, EndpointStateError, FetchShortfallError } from './errors.js';
export { EndpointLifecycle, type EndpointState, endpointStates, type EndpointTransition } from './lifecycle.js';
export type { HeldPin, PinLoss, PinLossReason } from './pins.js';
export { type BankCounts, EndpointMetrics, type EndpointMetricsOptions, type MetricsListener, type TransferRecord, type TransferSide } from './metrics.js';
export { ReuseEndpoint, type ReuseEndpointOptions } from './reuse-endpoint.js';
export { blockChecksum, blockChecksums, type ChecksumSide, type RankBankBytes } from './block-checksum.js';
export { type FetchOptions, type FetchPair, fetchPrefix, type SavingPrediction, type ShortfallPolicy, type VerifyMode } from './fetch.js';
export type { FetchReceipt, RecomputeReason, SavingComparison } from './fetch-receipt.js';
