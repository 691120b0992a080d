/**
 * The advisory retained inventory: which worker retains which prefix of which model, in which tier and
 * until when; block hashing, the inventory events and batches, and their publication through discovery.
 *
 * @packageDocumentation
 * @module \@kvreuse/inventory
 */
export * from './errors.js';
export {
  blockHashFromHex,
  blockHashFunction,
  blockHashSalt,
  type BlockHashScheme,
  blockHashScheme,
  blockHashToHex,
  fnv1a64,
  hashBlockChain,
} from './block-hash.js';
export {
  encodeInventoryBatch,
  type InventoryBatch,
  type InventoryEvent,
  inventoryWireVersion,
  inventoryWireVersions,
  parseInventoryBatch,
  type RetentionTier,
  retentionTiers,
  type SafeParseResult,
  safeParseInventoryBatch,
} from './events.js';
export { type AdvisoryRetainedPrefix, RetainedInventory, type RetainedInventoryOptions } from './retained-inventory.js';
export {
  defaultInventoryPrefix,
  followInventory,
  type InventoryFollower,
  type InventoryFollowerOptions,
  InventoryPublisher,
  type InventoryPublisherOptions,
  type InventoryPublishOptions,
} from './discovery-feed.js';
export { inventoryGroup } from './settings.js';
