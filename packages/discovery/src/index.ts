/**
 * Discovery: one store interface with memory, SQLite and etcd backends, the cluster secret that signs
 * what workers publish, the rank-part records and keys, incarnation epochs and fences, and worker
 * readiness as read from a store.
 *
 * @packageDocumentation
 * @module \@kvreuse/discovery
 */
export * from './errors.js';
export type { DiscoveryBackend } from './backend.js';
export { entryText } from './common.js';
export { connectEtcdDiscovery, EtcdDiscoveryStore, type EtcdDiscoveryOptions } from './etcd.js';
export type { EtcdTlsFiles, EtcdUser } from './etcd-security.js';
export { MemoryDiscoveryStore, type MemoryDiscoveryOptions } from './memory.js';
export {
  type CloseRemovingCreatedFileOptions,
  openSqliteDiscovery,
  SqliteDiscoveryStore,
  type SqliteDiscoveryOptions,
} from './sqlite.js';
export type * from './types.js';
export { type DiscoverySettings, openDiscovery } from './open.js';
export {
  ClusterSecret,
  clusterSecretMinBytes,
  type ClusterSecretSettings,
  openClusterSecret,
  type SealedBytes,
} from './cluster-secret.js';
export type { GateVerdict, ReadinessGate } from './gate.js';
export {
  assertNewestEpoch,
  claimIncarnationEpoch,
  commitFenced,
  type IncarnationEpoch,
  type IncarnationEpochOptions,
  isEpoch,
  readWorkerEpoch,
} from './incarnation-epoch.js';
export {
  type MetadataSlot,
  openSealedMetadata,
  sealedMetadataSizes,
  type SealedMetadataSizes,
  sealMetadata,
} from './metadata-seal.js';
export { type OptionChecks, optionChecks, type OptionRefusal } from './option-checks.js';
export { type RankPublication, type RankPublicationOptions, startRankPublication } from './publication.js';
export { publishRankParts, type PublishRankPartsOptions, withdrawRankParts } from './publish.js';
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
} from './rank-part-keys.js';
export {
  decodeRankPartRecord,
  encodeRankPartRecord,
  type RankPartRecord,
  type RankPartRecordResult,
  rankPartRecordFormat,
  rankPartRecordVersion,
  safeDecodeRankPartRecord,
  type StoredRankPart,
} from './rank-part-record.js';
export {
  type NotReadyReason,
  type VramBank,
  watchWorkerReadiness,
  type WatchWorkerReadinessOptions,
  type WorkerReadiness,
  type WorkerReadinessWatch,
} from './worker-readiness.js';
export { discoveryGroup } from './settings.js';
