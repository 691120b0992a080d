import { describeValue } from '@kvreuse/errors';
import { blocksOutermost, DescriptorWriter } from './descriptor-writer.js';
import { InvalidBlockListError, InvalidTransferTemplateError, isObject } from './errors.js';
import type { PlanOptions, RankPairPlan, TransferPlan } from './transfer-plan.js';
import { prepareTransfer, type TransferBlocks } from './prepared-transfer.js';
import type { TransferTemplate } from './template.js';

/** The routes `[first, end)` of a template as numbers, for expanding them in JavaScript. */
function routesAsNumbers(template: TransferTemplate, first: number, end: number) {
  const numbers = (values: BigUint64Array): Float64Array => Float64Array.from(values.subarray(first, end), Number);
  return {
    sourceBank: template.sourceBank.subarray(first, end),
    destinationBank: template.destinationBank.subarray(first, end),
    sourceBase: numbers(template.sourceBase),
    destinationBase: numbers(template.destinationBase),
    sourceBlockStride: numbers(template.sourceBlockStride),
    destinationBlockStride: numbers(template.destinationBlockStride),
    rows: template.rows.subarray(first, end),
    rowBytes: numbers(template.rowBytes),
    sourceRowStride: numbers(template.sourceRowStride),
    destinationRowStride: numbers(template.destinationRowStride),
  };
}

const EXACT_LIMIT = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Refuses a template whose routes reach past byte 2^53 − 1 of a bank, or lack an entry, for the offsets are
 * expanded as numbers. Templates from `buildTransferTemplate` never do (their workers' banks span less), but a
 * template is a plain object anyone can put together.
 */
function checkRouteReach(template: TransferTemplate): void {
  const end = template.pairRouteStart[template.pairs.length] ?? 0;
  for (let r = template.pairRouteStart[0] ?? 0; r < end; r++) {
    for (const side of ['source', 'destination'] as const) {
      const terms = {
        [`${side}Base`]: template[`${side}Base`][r],
        [`${side}Limit.blocks`]: template[`${side}Limit`].blocks,
        [`${side}BlockStride`]: template[`${side}BlockStride`][r],
        rows: template.rows[r],
        [`${side}RowStride`]: template[`${side}RowStride`][r],
        rowBytes: template.rowBytes[r],
      };
      const reach = routeReach(Object.values(terms));
      if (reach !== undefined && reach <= EXACT_LIMIT) continue;
      const named = Object.entries(terms)
        .map(([name, term]) => `${name} ${describeValue(term)}`)
        .join(', ');
      throw new InvalidTransferTemplateError(
        template,
        `route ${r} must reach at most byte 2^53 − 1 of its ${side} bank, as materialize counts offsets in ` +
          `numbers; it has ${named}${reach === undefined ? '' : `, so it reaches byte ${reach}`}`,
      );
    }
  }
}

/** `base + (blocks − 1) × blockStride + (rows − 1) × rowStride + rowBytes`, or `undefined` when a term is missing. */
function routeReach(terms: readonly (number | bigint | undefined)[]): bigint | undefined {
  if (!terms.every((term) => typeof term === 'bigint' || Number.isSafeInteger(term))) return undefined;
  const [base, blocks, blockStride, rows, rowStride, rowBytes] = terms.map((term) => BigInt(term as number | bigint));
  return base! + (blocks! - 1n) * blockStride! + (rows! - 1n) * rowStride! + rowBytes!;
}

/**
 * The explicit descriptors a template and two block lists stand for, one list per rank pair, in the
 * order the native library issues the template's routes (coalesced unless `coalesce: false`). For
 * tools, tests and transports that take explicit descriptors; checks the blocks like `prepareTransfer`, and
 * refuses a template whose routes reach past byte 2^53 − 1 of a bank or lack an entry
 * (`InvalidTransferTemplateError`).
 * A template posted as is moves the same bytes without writing these descriptors.
 */
export function materialize(
  template: TransferTemplate,
  blocks: TransferBlocks,
  options: PlanOptions = {},
): TransferPlan {
  if (!isObject(blocks))
    throw new InvalidBlockListError(
      undefined,
      blocks,
      "materialize's blocks must be { sourceBlocks, destinationBlocks }",
    );
  const { sourceBlocks, destinationBlocks } = prepareTransfer({ template, ...blocks });
  if (!isObject(options) || (options.coalesce !== undefined && typeof options.coalesce !== 'boolean')) {
    throw new InvalidTransferTemplateError(
      options,
      `materialize's options must be { coalesce?: boolean }, got ${describeValue(options)}`,
    );
  }
  const n = sourceBlocks.length;
  if (n === 0) return { pairs: [], totalBytes: 0n, descriptorCount: 0 };
  checkRouteReach(template);
  const coalesce = options.coalesce ?? true;
  const pairs = template.pairs.map((pair, p): RankPairPlan => {
    const first = template.pairRouteStart[p] as number;
    const routes = routesAsNumbers(template, first, template.pairRouteStart[p + 1] as number);
    const routeCount = routes.rows.length;
    let rowsPerBlock = 0;
    let bytesPerBlock = 0;
    for (let r = 0; r < routeCount; r++) {
      rowsPerBlock += routes.rows[r] as number;
      bytesPerBlock += (routes.rows[r] as number) * (routes.rowBytes[r] as number);
    }
    const writer = new DescriptorWriter(n * rowsPerBlock, coalesce);
    const blocksOuter = blocksOutermost(routes.sourceBank, routes.destinationBank);
    const outerCount = blocksOuter ? n : routeCount;
    const innerCount = blocksOuter ? routeCount : n;
    for (let outer = 0; outer < outerCount; outer++) {
      for (let inner = 0; inner < innerCount; inner++) {
        const r = blocksOuter ? inner : outer;
        const block = blocksOuter ? outer : inner;
        const rowBytes = routes.rowBytes[r] as number;
        let sourceOffset =
          (routes.sourceBase[r] as number) + (sourceBlocks[block] as number) * (routes.sourceBlockStride[r] as number);
        let destinationOffset =
          (routes.destinationBase[r] as number) +
          (destinationBlocks[block] as number) * (routes.destinationBlockStride[r] as number);
        for (let row = routes.rows[r] as number; row > 0; row--) {
          writer.add(
            routes.sourceBank[r] as number,
            routes.destinationBank[r] as number,
            sourceOffset,
            destinationOffset,
            rowBytes,
          );
          sourceOffset += routes.sourceRowStride[r] as number;
          destinationOffset += routes.destinationRowStride[r] as number;
        }
      }
    }
    return { ...pair, ...writer.finish(), bytes: BigInt(n) * BigInt(bytesPerBlock) };
  });
  return {
    pairs,
    totalBytes: pairs.reduce((sum, pair) => sum + pair.bytes, 0n),
    descriptorCount: pairs.reduce((sum, pair) => sum + pair.count, 0),
  };
}
