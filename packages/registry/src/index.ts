/**
 * Banks and owners, explicit transactional registration, and the publication of a worker's rank parts and sealed transport metadata through discovery.
 *
 * @packageDocumentation
 * @module \@kvreuse/registry
 */
export * from './errors.js';
export { Bank, type BankReference, type BankSpec } from './banks/bank.js';
export { type BankLabel, type BankRetainedBy, type BankState, formatBank, type RetainedBank } from './banks/label.js';
export {
  type BankOwner,
  frameworkOwner,
  type FrameworkOwner,
  kvreuseOwner,
  type KvreuseOwner,
  type OwnedAllocation,
} from './banks/owner.js';
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
export { buildRankPart, type TransportMetadata, type WorkerIdentity } from './readiness/build-rank-part.js';
export { loadRankPeer, transportMetadataOf } from './readiness/transport-metadata.js';
