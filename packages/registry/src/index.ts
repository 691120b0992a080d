/**
 * Banks and owners, explicit transactional registration, rank-descriptor publication, readiness, discovery stores and the retained inventory.
 *
 * @packageDocumentation
 * @module \@kvreuse/registry
 */
export * from './errors.js';
export * from './discovery/index.js';
export { Bank, type BankReference, type BankSpec } from './banks/bank.js';
export { type BankOwner, frameworkOwner, type FrameworkOwner, kvreuseOwner, type KvreuseOwner, type OwnedAllocation } from './banks/owner.js';
export {
  type BanksDeregistration,
  type BanksRelease,
  deregisterBanks,
  registerRank,
  type RegisteredRank,
  type RegisterRankOptions,
  type RegistrationAgent,
  releaseBanks,
  releaseRank,
  returnBanks,
} from './registration/register-rank.js';
export type { GateVerdict, ReadinessGate } from './readiness/gate.js';
export {
  assertNewestEpoch,
  claimIncarnationEpoch,
  commitFenced,
  type IncarnationEpoch,
  type IncarnationEpochOptions,
  readWorkerEpoch,
} from './readiness/incarnation-epoch.js';
export {
  buildRankPart,
  publishRankParts,
  type PublishRankPartsOptions,
  type TransportMetadata,
  withdrawRankParts,
  type WorkerIdentity,
} from './readiness/publish.js';
export { type RankPublication, type RankPublicationOptions, startRankPublication } from './readiness/publication.js';
export { type SignedMetadataSizes, signedMetadataSizes } from './readiness/metadata-signature.js';
export { loadRankPeer, transportMetadataOf } from './readiness/transport-metadata.js';
export {
  checkKeySegment,
  defaultKeyPrefix,
  incarnationEpochKey,
  incarnationPartsPrefix,
  parseRankPartKey,
  rankPartKey,
  workerEpochKey,
  type WorkerIncarnation,
  workerKeyPrefix,
  workerPartsPrefix,
} from './readiness/rank-part-keys.js';
export {
  decodeRankPartRecord,
  encodeRankPartRecord,
  type RankPartRecord,
  type RankPartRecordResult,
  rankPartRecordFormat,
  rankPartRecordVersion,
  safeDecodeRankPartRecord,
  type StoredRankPart,
} from './readiness/rank-part-record.js';
export {
  type NotReadyReason,
  type VramBank,
  watchWorkerReadiness,
  type WatchWorkerReadinessOptions,
  type WorkerReadiness,
  type WorkerReadinessWatch,
} from './readiness/worker-readiness.js';
export * from './inventory/index.js';
