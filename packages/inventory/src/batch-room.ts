// Whether one worker's batch fits the retained table's ceilings: its distinct blocks and its overflow
// entries (workers retaining a block beyond its first). Followed change by change, before any is made,
// so that what a batch removes makes room for what it stores after, and a batch is refused whole.
import { BlockStates } from './block-states.js';
import { InventoryFullError } from './errors.js';
import type { RetainedTable } from './retained-table.js';
import { heldShared, type TableChange } from './table-change.js';

const tierBits = 0b11;

/**
 * Refuses (`InventoryFullError`, naming `workerId`) `changes` to `worker`'s entries (undefined: a worker
 * the table has no slot for yet) that would, at any point in their order, hold more distinct blocks or
 * more overflow entries than the table has room for. Changes nothing.
 */
export function checkBatchRoom(
  table: RetainedTable,
  worker: number | undefined,
  changes: readonly TableChange[],
  workerId: string,
): void {
  let storing = 0;
  for (const change of changes) if (change.type === 'store') storing += change.words.length / 2;
  // Every stored block takes a distinct block or an overflow entry at most: most batches fit even so.
  if (storing <= table.room && storing <= table.furtherHolderRoom) return;

  // The worker's entries the changes touched, as they leave them (`HeldBlock`s).
  const entries = new BlockStates();
  // Whether `entries` holds every entry the worker had: the first `clear` reads them all.
  let allRead = worker === undefined;
  const entryOf = (lo: number, hi: number): number => {
    const slot = entries.find(lo, hi);
    return slot >= 0 ? slot : entries.add(slot, lo, hi, table.heldBlock(worker, lo, hi));
  };
  let blocks = 0;
  let furtherHolders = 0;
  let mostBlocks = 0;
  let mostFurtherHolders = 0;
  const removeTier = (slot: number, tier: 0 | 1): void => {
    const state = entries.stateAt(slot);
    if ((state & tierBits) === 0) return;
    const left = state & ~(1 << tier);
    entries.setStateAt(slot, left);
    if ((left & tierBits) !== 0) return;
    if ((left & heldShared) !== 0) furtherHolders--;
    else blocks--;
  };
  for (const change of changes) {
    if (change.type === 'clear') {
      if (!allRead) table.forEachHeld(worker!, entryOf);
      allRead = true;
      for (let slot = 0; slot < entries.slots; slot++) if (entries.stateAt(slot) >= 0) removeTier(slot, change.tier);
      continue;
    }
    const { words, tier } = change;
    for (let i = 0; i < words.length; i += 2) {
      const slot = entryOf(words[i]!, words[i + 1]!);
      if (change.type === 'remove') {
        removeTier(slot, tier);
        continue;
      }
      const state = entries.stateAt(slot);
      if ((state & tierBits) === 0) {
        if ((state & heldShared) !== 0) mostFurtherHolders = Math.max(mostFurtherHolders, ++furtherHolders);
        else mostBlocks = Math.max(mostBlocks, ++blocks);
      }
      entries.setStateAt(slot, state | (1 << tier));
    }
  }
  if (mostBlocks > table.room)
    throw new InventoryFullError(workerId, 'blocks', mostBlocks, table.room, table.maxBlocks);
  if (mostFurtherHolders > table.furtherHolderRoom)
    throw new InventoryFullError(
      workerId,
      'further-holders',
      mostFurtherHolders,
      table.furtherHolderRoom,
      table.maxFurtherHolders,
    );
}
