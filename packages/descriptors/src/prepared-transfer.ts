import { BlockOutOfRangeError, DuplicateDestinationBlockError, InvalidBlockListError, InvalidTransferTemplateError } from './errors.js';
import { type TransferTemplate, transferTemplateFormat } from './template.js';

/** The blocks of one request: block `sourceBlocks[i]` of the source goes to block `destinationBlocks[i]` of the destination. */
export interface TransferBlocks {
  readonly sourceBlocks: Uint32Array;
  readonly destinationBlocks: Uint32Array;
}

export interface TransferRequest extends TransferBlocks {
  readonly template: TransferTemplate;
}

/** A request whose block lists were checked against its template; the lists are the caller's own arrays. */
export interface PreparedTransfer extends TransferRequest {
  /** Bytes the request moves: blocks × `template.blockBytes`. */
  readonly totalBytes: bigint;
}

/** One bit per destination block, reused across requests of a template; cleared again after each check. */
const destinationSeen = new WeakMap<TransferTemplate, Uint32Array>();

function seenBitsOf(template: TransferTemplate): Uint32Array {
  let bits = destinationSeen.get(template);
  if (bits === undefined) {
    bits = new Uint32Array(Math.ceil(template.destinationLimit.blocks / 32));
    destinationSeen.set(template, bits);
  }
  return bits;
}

function checkTemplate(template: unknown): asserts template is TransferTemplate {
  const format = typeof template === 'object' && template !== null ? (template as { format?: unknown }).format : undefined;
  if (format !== transferTemplateFormat) {
    throw new InvalidTransferTemplateError(template, `expected a template from buildTransferTemplate (format ${transferTemplateFormat}), got format ${String(format)}`);
  }
}

/**
 * Checks the two block lists of a request against the template in one pass, O(blocks): equally long
 * Uint32Arrays, every source block below `template.sourceLimit.blocks`, every destination block below
 * `template.destinationLimit.blocks` and written once. The first offending index throws
 * (`InvalidBlockListError`, `BlockOutOfRangeError`, `DuplicateDestinationBlockError`; at one index the
 * source range comes first, then the destination range, then the duplicate). The arrays are handed on as
 * they are, not copied: leave them unchanged until the transfer is done.
 */
export function prepareTransfer(request: TransferRequest): PreparedTransfer {
  const { template, sourceBlocks, destinationBlocks } = request;
  checkTemplate(template);
  if (!(sourceBlocks instanceof Uint32Array) || !(destinationBlocks instanceof Uint32Array)) {
    throw new InvalidBlockListError(undefined, { sourceBlocks, destinationBlocks }, 'sourceBlocks and destinationBlocks must be Uint32Arrays');
  }
  const count = sourceBlocks.length;
  if (destinationBlocks.length !== count) {
    const lengths = { sourceBlocks: count, destinationBlocks: destinationBlocks.length };
    throw new InvalidBlockListError(Math.min(count, destinationBlocks.length), lengths, 'sourceBlocks and destinationBlocks must be equally long');
  }
  const { sourceLimit, destinationLimit } = template;
  const sourceBlockCount = sourceLimit.blocks;
  const destinationBlockCount = destinationLimit.blocks;
  const seen = seenBitsOf(template);
  const forget = (upTo: number): void => {
    for (let index = 0; index < upTo; index++) seen[(destinationBlocks[index] as number) >>> 5] = 0;
  };
  for (let index = 0; index < count; index++) {
    const source = sourceBlocks[index] as number;
    const destination = destinationBlocks[index] as number;
    if (source >= sourceBlockCount || destination >= destinationBlockCount) {
      forget(index);
      throw source >= sourceBlockCount
        ? new BlockOutOfRangeError('source', sourceLimit.rank, sourceLimit.bank, source, sourceBlockCount, index)
        : new BlockOutOfRangeError('destination', destinationLimit.rank, destinationLimit.bank, destination, destinationBlockCount, index);
    }
    const word = destination >>> 5;
    const bit = 1 << (destination & 31);
    const bits = seen[word] as number;
    if ((bits & bit) !== 0) {
      forget(index);
      throw new DuplicateDestinationBlockError(destination, destinationBlocks.indexOf(destination), index);
    }
    seen[word] = bits | bit;
  }
  forget(count);
  return { template, sourceBlocks, destinationBlocks, totalBytes: BigInt(count) * template.blockBytes };
}
