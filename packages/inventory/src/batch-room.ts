// Whether one worker's batch fits the retained table's ceilings: its distinct blocks and its overflow
// entries (workers retaining a block beyond its first). Followed change by change, before any is made,
// so that what a batch removes makes room for what it stores after, and a batch is refused whole.
import { InventoryFullError } from './errors.js';
import type { RetainedTable } from './retained-table.js';
import type { HeldBlock, TableChange } from './table-change.js';

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

  // The worker's entries the changes touched, as they leave them.
  const entries = new Map<string, HeldBlock>();
  // Whether `entries` holds every entry the worker had: the first `clear` reads them all.
  let allRead = worker === undefined;
  const entryOf = (lo: number, hi: number): HeldBlock => {
    const key = `${lo} ${hi}`;
    let entry = entries.get(key);
    if (entry === undefined) {
      entry = table.heldBlock(worker, lo, hi);
      entries.set(key, entry);
    }
    return entry;
  };
  let blocks = 0;
  let furtherHolders = 0;
  let mostBlocks = 0;
  let mostFurtherHolders = 0;
  const removeTier = (entry: HeldBlock, tier: 0 | 1): void => {
    if (entry.tiers === 0) return;
    entry.tiers &= ~(1 << tier);
    if (entry.tiers !== 0) return;
    if (entry.shared) furtherHolders--;
    else blocks--;
  };
  for (const change of changes) {
    if (change.type === 'clear') {
      if (!allRead) table.forEachHeld(worker!, entryOf);
      allRead = true;
      for (const entry of entries.values()) removeTier(entry, change.tier);
      continue;
    }
    const { words, tier } = change;
    for (let i = 0; i < words.length; i += 2) {
      const entry = entryOf(words[i]!, words[i + 1]!);
      if (change.type === 'remove') {
        removeTier(entry, tier);
        continue;
      }
      if (entry.tiers === 0) {
        if (entry.shared) mostFurtherHolders = Math.max(mostFurtherHolders, ++furtherHolders);
        else mostBlocks = Math.max(mostBlocks, ++blocks);
      }
      entry.tiers |= 1 << tier;
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
