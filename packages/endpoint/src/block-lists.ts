// A transfer's block lists checked against its template before anything moves: pushes and pulls post a
// block or a pair at a time, and a bad block found at its turn would leave the work before it done.
import { BlockOutOfRangeError, prepareTransfer, type TransferTemplate } from '@kvreuse/descriptors';
import { messageOf } from '@kvreuse/errors';
import { EndpointOptionError } from './errors.js';

/**
 * Refuses (`EndpointOptionError`, naming `request.sourceBlocks` or `request.destinationBlocks`) block lists
 * with a block outside the template's banks or a destination block named twice.
 */
export function checkBlockLists(
  template: TransferTemplate,
  lists: { readonly sourceBlocks: Uint32Array; readonly destinationBlocks: Uint32Array },
): void {
  try {
    prepareTransfer({ template, ...lists });
  } catch (error) {
    const list =
      error instanceof BlockOutOfRangeError && error.side === 'source' ? 'sourceBlocks' : 'destinationBlocks';
    throw new EndpointOptionError(`request.${list}`, lists[list], messageOf(error));
  }
}
