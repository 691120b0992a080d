import { messageOf } from '@kvreuse/errors';
import { z } from 'zod';
import { InventoryEventError } from './errors.js';
import { blockHashFromHex, blockHashToHex } from './block-hash.js';

export type RetentionTier = 'gpu' | 'host';
export const retentionTiers: readonly RetentionTier[] = ['gpu', 'host'];

/**
 * What a worker says about the blocks it retains on one tier:
 * - `stored`: these blocks are retained until `expiresAt` (ms since the Unix epoch); storing a
 *   block again renews it;
 * - `removed`: these blocks are no longer retained;
 * - `cleared`: nothing is retained on this tier any more.
 */
export type InventoryEvent =
  | {
      readonly type: 'stored';
      readonly tier: RetentionTier;
      readonly blocks: BigUint64Array | readonly bigint[];
      readonly expiresAt: number;
    }
  | { readonly type: 'removed'; readonly tier: RetentionTier; readonly blocks: BigUint64Array | readonly bigint[] }
  | { readonly type: 'cleared'; readonly tier: RetentionTier };

/**
 * Events of one worker incarnation, numbered. `epoch` is the incarnation's epoch
 * (`claimIncarnationEpoch`): a batch of a larger epoch replaces everything older, and a batch of a
 * smaller epoch than the one applied (a superseded incarnation's) is ignored.
 */
export interface InventoryBatch {
  readonly workerId: string;
  readonly incarnation: string;
  readonly epoch: number;
  readonly seq: number;
  readonly events: readonly InventoryEvent[];
  /**
   * The incarnation has published its complete inventory, with this batch or before it: a router stops
   * treating it as warming. Once set, every later batch of the incarnation carries it too, so a follower
   * that sees only the latest batch learns it as well.
   */
  readonly complete?: boolean;
}

/** The wire version written for a batch that says its incarnation's inventory is complete; others are written as version 2. */
export const inventoryWireVersion = 3;
/** The wire versions this package reads: version 3 adds `complete`. */
export const inventoryWireVersions = [2, 3] as const;

/**
 * The smallest `expiresAt` accepted: 10^11 ms since the Unix epoch is March 1973. Anything smaller
 * cannot be an expiry in milliseconds — it is a timestamp in seconds (today's is about 1.7 × 10^9) —
 * and is refused rather than read as long expired.
 */
export const minExpiresAtMs = 1e11;
const secondsRefusal = `expiresAt is ms since the Unix epoch; a value below ${minExpiresAtMs} (March 1973) is a timestamp in seconds, not milliseconds`;

/** Refuses an `expiresAt` that is not a finite number of milliseconds since the Unix epoch. */
export function checkExpiresAt(path: string, expiresAt: unknown): void {
  if (typeof expiresAt !== 'number' || !Number.isFinite(expiresAt)) {
    throw new InventoryEventError(path, expiresAt, 'expiresAt is ms since the Unix epoch');
  }
  if (expiresAt < minExpiresAtMs) throw new InventoryEventError(path, expiresAt, secondsRefusal);
}

const maxHash = (1n << 64n) - 1n;

export function checkBlocks(path: string, blocks: unknown): BigUint64Array | readonly bigint[] {
  if (blocks instanceof BigUint64Array) return blocks;
  if (!Array.isArray(blocks))
    throw new InventoryEventError(path, blocks, 'blocks are a BigUint64Array or an array of bigint');
  // Indexed, not forEach: a hole in a sparse array is refused too.
  for (let i = 0; i < blocks.length; i++) {
    const hash: unknown = blocks[i];
    if (typeof hash !== 'bigint' || hash < 0n || hash > maxHash) {
      throw new InventoryEventError(`${path}.${i}`, hash, 'a block hash is a bigint from 0 to 2^64 − 1');
    }
  }
  return blocks as readonly bigint[];
}

/**
 * Refuses a list of events that is not an array of events (what `RetainedInventory.apply` and
 * `InventoryPublisher.publish` take), naming the first bad one.
 */
export function checkEvents(path: string, events: unknown): readonly InventoryEvent[] {
  if (!Array.isArray(events)) throw new InventoryEventError(path, events, 'events are an array');
  // Indexed, not forEach: a hole in a sparse array is refused too.
  for (let i = 0; i < events.length; i++) checkEvent(`${path}.${i}`, events[i] as InventoryEvent);
  return events as readonly InventoryEvent[];
}

function checkEvent(path: string, event: InventoryEvent): void {
  if (event === null || typeof event !== 'object') throw new InventoryEventError(path, event, 'an event is an object');
  if (!retentionTiers.includes(event.tier)) {
    throw new InventoryEventError(`${path}.tier`, event.tier, "a tier is 'gpu' or 'host'");
  }
  switch (event.type) {
    case 'stored':
      checkExpiresAt(`${path}.expiresAt`, event.expiresAt);
      checkBlocks(`${path}.blocks`, event.blocks);
      return;
    case 'removed':
      checkBlocks(`${path}.blocks`, event.blocks);
      return;
    case 'cleared':
      return;
    default:
      throw new InventoryEventError(
        `${path}.type`,
        (event as { type: unknown }).type,
        "a type is 'stored', 'removed' or 'cleared'",
      );
  }
}

const blockList = z.array(z.string().regex(/^[0-9a-f]{16}$/, 'a block hash is 16 lowercase hex digits'));
const tier = z.enum(['gpu', 'host']);
const wireBatch = z
  .strictObject({
    version: z.literal(inventoryWireVersions),
    workerId: z.string().min(1).max(256),
    incarnation: z.string().min(1).max(256),
    epoch: z.number().int().positive(),
    seq: z.number().int().nonnegative(),
    events: z.array(
      z.discriminatedUnion('type', [
        z.strictObject({
          type: z.literal('stored'),
          tier,
          blocks: blockList,
          expiresAt: z.number().int().min(minExpiresAtMs, secondsRefusal),
        }),
        z.strictObject({ type: z.literal('removed'), tier, blocks: blockList }),
        z.strictObject({ type: z.literal('cleared'), tier }),
      ]),
    ),
    complete: z.literal(true, 'complete is true when given').optional(),
  })
  .refine((batch) => batch.complete === undefined || batch.version >= 3, {
    path: ['complete'],
    message: 'needs inventory wire version 3',
  });

const toBlocks = (hex: readonly string[]): BigUint64Array =>
  BigUint64Array.from(hex, (text) => blockHashFromHex(text) ?? 0n);

/** An event in its wire form: block hashes as 16 hex digits, an expiry in whole ms. */
export type WireEvent =
  | { readonly type: 'stored'; readonly tier: RetentionTier; readonly blocks: string[]; readonly expiresAt: number }
  | { readonly type: 'removed'; readonly tier: RetentionTier; readonly blocks: string[] }
  | { readonly type: 'cleared'; readonly tier: RetentionTier };

/** The events in their wire form, read once: what is encoded does not change with the caller's arrays afterwards. */
export function toWireEvents(events: readonly InventoryEvent[]): readonly WireEvent[] {
  // Field by field: a field the event carries beyond its type's would make every follower refuse the batch.
  return events.map((event) =>
    event.type === 'cleared'
      ? { type: event.type, tier: event.tier }
      : event.type === 'removed'
        ? { type: event.type, tier: event.tier, blocks: Array.from(event.blocks, blockHashToHex) }
        : {
            type: event.type,
            tier: event.tier,
            blocks: Array.from(event.blocks, blockHashToHex),
            // The wire takes whole ms up to 2^53 − 1: a fractional expiry is rounded down, a later one capped.
            expiresAt: Math.min(Math.floor(event.expiresAt), Number.MAX_SAFE_INTEGER),
          },
  );
}

/** A batch whose events are already in their wire form (`toWireEvents`), as `encodeInventoryBatch` writes it. */
export function encodeWireBatch(batch: Omit<InventoryBatch, 'events'>, events: readonly WireEvent[]): string {
  return JSON.stringify({
    version: batch.complete === true ? inventoryWireVersion : 2,
    workerId: batch.workerId,
    incarnation: batch.incarnation,
    epoch: batch.epoch,
    seq: batch.seq,
    events,
    ...(batch.complete === true ? { complete: true } : {}),
  });
}

/**
 * The wire form: JSON with block hashes as 16 hex digits; version 2 (which followers of every release
 * read) unless the batch says its inventory is complete, which needs version 3.
 */
export function encodeInventoryBatch(batch: InventoryBatch): string {
  return encodeWireBatch(batch, toWireEvents(batch.events));
}

export type SafeParseResult<T, E> = { success: true; data: T } | { success: false; error: E };

/** Parses the wire form (text or UTF-8 bytes); never throws. */
export function safeParseInventoryBatch(
  input: string | Uint8Array,
): SafeParseResult<InventoryBatch, InventoryEventError> {
  let json: unknown;
  try {
    json = JSON.parse(typeof input === 'string' ? input : new TextDecoder('utf-8', { fatal: true }).decode(input));
  } catch (error) {
    const reason = messageOf(error);
    return { success: false, error: new InventoryEventError('', input, `not JSON text: ${reason}`) };
  }
  const parsed = wireBatch.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const path = issue.path.map(String).join('.');
    const value = issue.path.reduce<unknown>(
      (at, step) => (at !== null && typeof at === 'object' ? (at as Record<PropertyKey, unknown>)[step] : undefined),
      json,
    );
    return { success: false, error: new InventoryEventError(path, value, issue.message) };
  }
  const { workerId, incarnation, epoch, seq, events, complete } = parsed.data;
  return {
    success: true,
    data: {
      workerId,
      incarnation,
      epoch,
      seq,
      events: events.map((event) => (event.type === 'cleared' ? event : { ...event, blocks: toBlocks(event.blocks) })),
      ...(complete === undefined ? {} : { complete }),
    },
  };
}

/** Parses the wire form, or throws `InventoryEventError` naming the path and value refused. */
export function parseInventoryBatch(input: string | Uint8Array): InventoryBatch {
  const result = safeParseInventoryBatch(input);
  if (!result.success) throw result.error;
  return result.data;
}
