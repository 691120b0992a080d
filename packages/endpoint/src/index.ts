export { EndpointError, type EndpointErrorCode, EndpointOptionError, EndpointStateError } from './errors.js';
export { EndpointLifecycle, type EndpointState, endpointStates, type EndpointTransition } from './lifecycle.js';
export type { HeldPin, PinLoss, PinLossReason } from './pins.js';
export { type BankCounts, EndpointMetrics, type EndpointMetricsOptions, type MetricsListener, type TransferRecord, type TransferSide } from './metrics.js';
export { ReuseEndpoint, type ReuseEndpointOptions } from './reuse-endpoint.js';
