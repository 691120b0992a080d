// Typed errors of @kvreuse/inventory. Every error carries a stable `code` and names the offending
// thing (block input, event path, worker) and the value that was refused.
import { describeValue as describe, KvreuseError } from '@kvreuse/errors';

/** Every `code` an inventory error carries. */
export type InventoryErrorCode =
  | 'INVENTORY_INVALID_BLOCK_INPUT'
  | 'INVENTORY_INVALID_EVENT'
  | 'INVENTORY_WITHDRAWN'
  | 'INVENTORY_FULL'
  | 'INVALID_INVENTORY_OPTION';

export abstract class InventoryError extends KvreuseError<InventoryErrorCode> {}

/** Token ids, a block size, a salt or its inputs that cannot be hashed into a block chain. */
export class BlockHashError extends InventoryError {
  readonly code = 'INVENTORY_INVALID_BLOCK_INPUT';
  constructor(
    readonly argument: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`block hash: ${argument} = ${describe(value)} is refused: ${reason}`);
  }
}

/** An inventory event or batch that is malformed; `path` says where. */
export class InventoryEventError extends InventoryError {
  readonly code = 'INVENTORY_INVALID_EVENT';
  constructor(
    readonly path: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`inventory event: ${path || '(root)'} = ${describe(value)} is refused: ${reason}`);
  }
}

/** An inventory publisher was asked to publish after `withdraw()`: a withdrawn worker announces nothing. */
export class InventoryWithdrawnError extends InventoryError {
  readonly code = 'INVENTORY_WITHDRAWN';
  constructor(
    readonly workerId: string,
    readonly incarnation: string,
  ) {
    super(`inventory of worker ${workerId} (incarnation ${incarnation}) was withdrawn; it publishes no further batch`);
  }
}

/**
 * Which ceiling of the retained inventory a batch would pass: its distinct blocks, or its further
 * holders (a worker retaining a block another worker retains too). It holds at most 2^27 of each.
 */
export type InventoryLimit = 'blocks' | 'further-holders';

const limitWords: Record<InventoryLimit, string> = {
  blocks: 'distinct blocks',
  'further-holders': 'further holders (workers retaining a block another worker retains too)',
};

/**
 * A worker's batch would, at some point in its order, hold more distinct blocks or more further holders
 * than the retained inventory has room for (what it removes before that counts); the whole batch was
 * refused and nothing changed.
 */
export class InventoryFullError extends InventoryError {
  readonly code = 'INVENTORY_FULL';
  constructor(
    /** The worker whose batch was refused. */
    readonly workerId: string,
    readonly limit: InventoryLimit,
    /** How many more of them the batch needs at its fullest. */
    readonly needed: number,
    /** How many more of them the inventory had room for when the batch came (fewer than `needed`). */
    readonly room: number,
    /** The most the inventory holds. */
    readonly most: number,
  ) {
    super(
      `retained inventory is full: a batch of worker ${workerId} needs room for ${needed} more ${limitWords[limit]}, ` +
        `room is left for ${room} of its ${most}; the batch is refused`,
    );
  }
}

/** An option of an inventory function or constructor that is missing or has the wrong shape; `option` names it. */
export class InvalidInventoryOptionError extends InventoryError {
  readonly code = 'INVALID_INVENTORY_OPTION';
  constructor(
    readonly option: string,
    readonly value: unknown,
    readonly rule: string,
  ) {
    super(`${option} = ${describe(value)} is refused: ${rule}`);
  }
}
