/**
 * Geometry, rank descriptors, worker completeness, compatibility, geometry digest and transfer planning for kvreuse.
 *
 * @packageDocumentation
 * @module \@kvreuse/descriptors
 */
export {
  BlockOutOfRangeError,
  DescriptorError,
  type DescriptorErrorCode,
  DuplicateDestinationBlockError,
  IncompatibleWorkersError,
  InvalidBankLayoutError,
  InvalidBlockListError,
  InvalidGeometryError,
  InvalidRankPartError,
  InvalidShardError,
  InvalidTransferTemplateError,
  PieceOutOfRangeError,
} from './errors.js';
export type { FieldIssue } from './field-issue.js';
export type { RankId } from './rank-id.js';
export {
  type BankLayout,
  bytesPerElement,
  type Dtype,
  dtypes,
  type Geometry,
  geometryFields,
  geometrySchema,
  type HeadOrder,
  parseGeometry,
  type SafeParseResult,
  safeParseGeometry,
} from './geometry.js';
export { deriveShard, type IndexRange, type Parallel, type Shard, shardSplitIssue } from './shard.js';
export {
  bankCount,
  type BankLayoutOptions,
  bankSpan,
  type BankStrides,
  type PlaneStrideOption,
  elementOffset,
  layoutRankBanks,
  minimumBlockStride,
  pieceBytes,
  rankBlockBytes,
} from './layout.js';
export { type Bank, bankSchema, type MemKind, memKinds } from './bank.js';
export {
  locatePiece,
  parseRankPart,
  type RankPart,
  type RankPartWire,
  rankPartSchema,
  rankPartVersions,
  type Role,
  roles,
  safeParseRankPart,
  serializeRankPart,
} from './rank-part.js';
export { canonicalGeometry, canonicalKvContent, geometryDigest, kvContentDigest, kvContentFields } from './digest.js';
export {
  type AssembleResult,
  assembleWorker,
  type DuplicateRank,
  type RankConflict,
  rankPartOf,
  type Worker,
} from './worker.js';
export { checkCompatibility, type CompatibilityResult, type RankRoute, type TransferMapping } from './compatibility.js';
export type { IncompatibilityCode, IncompatibilityReason } from './incompatibility.js';
export type { PlanOptions, RankPairPlan, TransferPlan } from './transfer-plan.js';
export {
  type BlockLimit,
  buildTransferTemplate,
  type TransferTemplate,
  transferTemplateFormat,
  type TemplateWorker,
} from './template.js';
export {
  type PreparedTransfer,
  prepareTransfer,
  type TransferBlocks,
  type TransferRequest,
} from './prepared-transfer.js';
export { materialize } from './materialize.js';
export { referenceGeometries, type ReferenceModel } from './reference.js';
export { type TransportBackend, transportBackends } from './transport-backend.js';
