/**
 * The reuse endpoint: pins as leases at the source, prepared pulls with per-block verification at the destination, receipts.
 *
 * @packageDocumentation
 * @module \@kvreuse/endpoint
 */
export {
  AllBlocksPinnedError,
  EndpointError,
  type EndpointErrorCode,
  EndpointOptionError,
  MetricsPortError,
  PinMessageError,
  PinRefusedError,
  PinTimeoutError,
  PinTooLargeError,
  type PullRefusal,
  PullRefusedError,
  ReaderClosedError,
  SourceUnresponsiveError,
  UnknownReaderError,
} from './errors.js';
export {
  EndpointLifecycle,
  EndpointNotReadyError,
  type EndpointState,
  EndpointStateError,
  endpointStates,
  type EndpointTransition,
} from './lifecycle.js';
export type { BeforeRelease, HeldPin, PinLoss, PinLossReason } from './pins.js';
export {
  type BankCounts,
  EndpointMetrics,
  type EndpointMetricsOptions,
  listenMetrics,
  type MetricsListener,
  type TransferRecord,
  type TransferSide,
} from './metrics.js';
export {
  type EndpointDrainReport,
  type EndpointShutdownResult,
  type OpenRankOptions,
  type ReadyRank,
  ReuseEndpoint,
} from './reuse-endpoint.js';
export { PublicationRollbackError } from './endpoint-publication.js';
export type { ReuseEndpointOptions } from './endpoint-options.js';
export type { ServeOptions } from './source-side.js';
export { PushFailedError, type PushReceipt, type PushRequest } from './push-side.js';
export {
  type PullRequest,
  type SavingPrediction,
  type ShortfallPolicy,
  type VerifyMode,
  verifyModes,
} from './pull-request.js';
export {
  type NotificationHandler,
  NotificationRouter,
  type NotificationRouterOptions,
  type PeerEventHandler,
} from './notification-router.js';
export { blockChecksum, blockChecksums, type ChecksumSide, type RankBankBytes } from './block-checksum.js';
export { type PullOptions, type PullPair, pullPrefix } from './pull.js';
export {
  calibrationSample,
  type PullPhases,
  type PullReceipt,
  PullShortfallError,
  type RecomputeReason,
  type SavingComparison,
} from './pull-receipt.js';
export type { AdapterGrant, EvictedBlock, PinAdapter } from './pin-adapter.js';
export { BlockPool } from './block-pool.js';
export {
  encodePinMessage,
  looksLikePinMessage,
  maxPinBlocks,
  maxPinMessageBytes,
  maxPinNameBytes,
  type PinGrantMessage,
  type PinMessage,
  type PinMessageKind,
  pinMessageVersion,
  type PinRefusalReason,
  pinRefusalReasons,
  type PinRefuseMessage,
  type PinReleasedMessage,
  type PinRenewedMessage,
  type PinRequestMessage,
  type PinRevocationReason,
  pinRevocationReasons,
  type PinRevokeMessage,
  type PinSequencedMessage,
  parsePinMessage,
  safeParsePinMessage,
  type SafeParsedPinMessage,
} from './pin-messages.js';
export {
  type OpenedPinMessage,
  openPinMessage,
  PinChannel,
  type PinChannelOptions,
  type PinMessageRefusal,
  pinMessageRefusals,
  pinTagBytes,
  sealPinBytes,
  sealPinMessage,
} from './pin-auth.js';
export {
  type PinEnd,
  type PinReadersOutcome,
  PinServer,
  type PinServerOptions,
  type PinSourceIdentity,
  type ServedPin,
} from './pin-server.js';
export { PinClient, type PinClientOptions, type PinRequest } from './pin-client.js';
export { endpointGroup } from './settings.js';
export { thisHost } from './this-host.js';
export { type AdoptedEngine, EngineSidecar, type EngineSidecarOptions, type SidecarReport } from './engine-sidecar.js';
export { EngineBlocks } from './engine-blocks.js';
export {
  adoptionProtocolVersion,
  type AdoptionRefusal,
  adoptionRefusals,
  type AdoptLayout,
  type AdoptMemory,
  cudaIpcHandleBytes,
  type EngineMessage,
  parseEngineMessage,
  type ParsedEngineMessage,
  type StoredBlock,
} from './adoption-messages.js';
