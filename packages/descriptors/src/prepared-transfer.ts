import { describeValue } from '@kvreuse/errors';
import {
  BlockOutOfRangeError,
  DuplicateDestinationBlockError,
  InvalidBlockListError,
  InvalidTransferTemplateError,
  isObject,
} from './errors.js';
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

/**
 * Per destination block, the number of the request that last wrote it (one counter per template): a
 * block is written twice in a request when it already holds that request's number. Nothing to clear.
 */
interface WrittenBlocks {
  request: number;
  readonly by: Uint32Array;
}
const writtenBlocks = new WeakMap<TransferTemplate, WrittenBlocks>();

/** The template's written-blocks table, numbered for a new request. */
function nextRequest(template: TransferTemplate): WrittenBlocks {
  let written = writtenBlocks.get(template);
  if (written === undefined) {
    written = { request: 0, by: new Uint32Array(template.destinationLimit.blocks) };
    writtenBlocks.set(template, written);
  }
  if (written.request === 0xffff_ffff) {
    written.by.fill(0);
    written.request = 0;
  }
  written.request++;
  return written;
}

function checkTemplate(template: unknown): asserts template is TransferTemplate {
  const format =
    typeof template === 'object' && template !== null ? (template as { format?: unknown }).format : undefined;
  if (format !== transferTemplateFormat) {
    throw new InvalidTransferTemplateError(
      template,
      `expected a template from buildTransferTemplate (format ${transferTemplateFormat}), got format ${String(format)}`,
    );
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
  if (!isObject(request)) {
    throw new InvalidTransferTemplateError(
      request,
      `the request must be an object with its template and block lists, got ${describeValue(request)}`,
    );
  }
  const { template, sourceBlocks, destinationBlocks } = request;
  checkTemplate(template);
  if (!(sourceBlocks instanceof Uint32Array) || !(destinationBlocks instanceof Uint32Array)) {
    throw new InvalidBlockListError(
      undefined,
      { sourceBlocks, destinationBlocks },
      'sourceBlocks and destinationBlocks must be Uint32Arrays',
    );
  }
  const count = sourceBlocks.length;
  if (destinationBlocks.length !== count) {
    const lengths = { sourceBlocks: count, destinationBlocks: destinationBlocks.length };
    throw new InvalidBlockListError(
      Math.min(count, destinationBlocks.length),
      lengths,
      'sourceBlocks and destinationBlocks must be equally long',
    );
  }
  const { sourceLimit, destinationLimit } = template;
  const sourceBlockCount = sourceLimit.blocks;
  const destinationBlockCount = destinationLimit.blocks;
  const written = nextRequest(template);
  const { request: thisRequest, by } = written;
  for (let index = 0; index < count; index++) {
    const source = sourceBlocks[index] as number;
    const destination = destinationBlocks[index] as number;
    if (source >= sourceBlockCount) {
      throw new BlockOutOfRangeError('source', sourceLimit.rank, sourceLimit.bank, source, sourceBlockCount, index);
    }
    if (destination >= destinationBlockCount) {
      throw new BlockOutOfRangeError(
        'destination',
        destinationLimit.rank,
        destinationLimit.bank,
        destination,
        destinationBlockCount,
        index,
      );
    }
    if (by[destination] === thisRequest)
      throw new DuplicateDestinationBlockError(destination, destinationBlocks.indexOf(destination), index);
    by[destination] = thisRequest;
  }
  return { template, sourceBlocks, destinationBlocks, totalBytes: BigInt(count) * template.blockBytes };
}
