import { describeValue, KvreuseError } from '@kvreuse/errors';
import type { FieldIssue } from './field-issue.js';
import type { IncompatibilityReason } from './incompatibility.js';
import { formatRank, type RankId } from './rank-id.js';

export type DescriptorErrorCode =
  | 'INVALID_GEOMETRY'
  | 'INVALID_RANK_PART'
  | 'INVALID_SHARD'
  | 'INVALID_BANK_LAYOUT'
  | 'INVALID_BLOCK_LIST'
  | 'INVALID_TRANSFER_TEMPLATE'
  | 'BLOCK_OUT_OF_RANGE'
  | 'PIECE_OUT_OF_RANGE'
  | 'DUPLICATE_DESTINATION_BLOCK'
  | 'INCOMPATIBLE_WORKERS';

/** Base of every error this package throws; `code` is stable across releases. */
export abstract class DescriptorError extends KvreuseError<DescriptorErrorCode> {}

/** Whether an argument is an object at all (not null, not a primitive), before its fields are read. */
export function isObject(value: unknown): value is object {
  return value !== null && typeof value === 'object';
}

function formatIssues(issues: readonly FieldIssue[]): string {
  return issues.map((issue) => `${issue.field} = ${describeValue(issue.value)}: ${issue.rule}`).join('; ');
}

export class InvalidGeometryError extends DescriptorError {
  readonly code = 'INVALID_GEOMETRY';
  override readonly name = 'InvalidGeometryError';
  readonly issues: readonly FieldIssue[];

  constructor(issues: readonly FieldIssue[], options?: ErrorOptions) {
    super(`invalid KV geometry: ${formatIssues(issues)}`, options);
    this.issues = issues;
  }
}

export class InvalidRankPartError extends DescriptorError {
  readonly code = 'INVALID_RANK_PART';
  override readonly name = 'InvalidRankPartError';
  /** The worker and rank the part claims to be, when those fields could be read. */
  readonly workerId: string | undefined;
  readonly rank: RankId | undefined;
  readonly issues: readonly FieldIssue[];

  constructor(
    workerId: string | undefined,
    rank: RankId | undefined,
    issues: readonly FieldIssue[],
    options?: ErrorOptions,
  ) {
    const who = [
      workerId === undefined ? undefined : `worker ${describeValue(workerId)}`,
      rank === undefined ? undefined : `rank (${formatRank(rank)})`,
    ].filter((s) => s !== undefined);
    super(`invalid rank part${who.length > 0 ? ` of ${who.join(' ')}` : ''}: ${formatIssues(issues)}`, options);
    this.workerId = workerId;
    this.rank = rank;
    this.issues = issues;
  }
}

/** A parallel split that does not divide the geometry (KV heads over TP, layers over PP). */
export class InvalidShardError extends DescriptorError {
  readonly code = 'INVALID_SHARD';
  override readonly name = 'InvalidShardError';
  readonly issue: FieldIssue;

  constructor(issue: FieldIssue) {
    super(`invalid shard: ${formatIssues([issue])}`);
    this.issue = issue;
  }
}

/** Options given to `layoutRankBanks` that cannot produce valid banks. */
export class InvalidBankLayoutError extends DescriptorError {
  readonly code = 'INVALID_BANK_LAYOUT';
  override readonly name = 'InvalidBankLayoutError';
  readonly issues: readonly FieldIssue[];

  constructor(issues: readonly FieldIssue[]) {
    super(`cannot lay out banks: ${formatIssues(issues)}`);
    this.issues = issues;
  }
}

/** The block list given to the planner is malformed (not pairs of non-negative 32-bit integers). */
export class InvalidBlockListError extends DescriptorError {
  readonly code = 'INVALID_BLOCK_LIST';
  override readonly name = 'InvalidBlockListError';
  /** The first offending position; `undefined` when the list as a whole has the wrong shape. */
  readonly index: number | undefined;
  readonly value: unknown;

  constructor(index: number | undefined, value: unknown, rule: string) {
    super(`invalid block list${index === undefined ? '' : ` at index ${index}`}: ${describeValue(value)}: ${rule}`);
    this.index = index;
    this.value = value;
  }
}

/**
 * Something given as a transfer template that `buildTransferTemplate` did not build (or of another format), or
 * a transfer request or `materialize` options of the wrong shape.
 */
export class InvalidTransferTemplateError extends DescriptorError {
  readonly code = 'INVALID_TRANSFER_TEMPLATE';
  override readonly name = 'InvalidTransferTemplateError';
  readonly value: unknown;

  constructor(value: unknown, rule: string) {
    super(`invalid transfer template: ${rule}`);
    this.value = value;
  }
}

export class BlockOutOfRangeError extends DescriptorError {
  readonly code = 'BLOCK_OUT_OF_RANGE';
  override readonly name = 'BlockOutOfRangeError';

  constructor(
    readonly side: 'source' | 'destination',
    readonly rank: RankId,
    readonly bank: number,
    readonly block: number,
    /** The bank's block count: valid blocks are `0 … blocks - 1`. */
    readonly blocks: number,
    /** Position of the offending pair in the block list. */
    readonly index: number,
  ) {
    super(
      `${side} block ${block} (block list index ${index}) is outside bank ${bank} of rank (${formatRank(rank)}), ` +
        `which holds ${blocks} blocks`,
    );
  }
}

/** A (block, local layer, plane) that the rank does not hold. */
export class PieceOutOfRangeError extends DescriptorError {
  readonly code = 'PIECE_OUT_OF_RANGE';
  override readonly name = 'PieceOutOfRangeError';

  constructor(
    readonly rank: RankId,
    readonly field: 'block' | 'localLayer' | 'plane',
    readonly value: number,
    /** Valid values are `0 … limit - 1`. */
    readonly limit: number,
  ) {
    super(`rank (${formatRank(rank)}) has no ${field} ${value}: valid values are 0 … ${limit - 1}`);
  }
}

export class DuplicateDestinationBlockError extends DescriptorError {
  readonly code = 'DUPLICATE_DESTINATION_BLOCK';
  override readonly name = 'DuplicateDestinationBlockError';
  readonly block: number;
  /** The two positions in the block list that write the same destination block. */
  readonly indices: readonly [number, number];

  constructor(block: number, first: number, second: number) {
    super(`destination block ${block} is written twice, by block list indices ${first} and ${second}`);
    this.block = block;
    this.indices = [first, second];
  }
}

export class IncompatibleWorkersError extends DescriptorError {
  readonly code = 'INCOMPATIBLE_WORKERS';
  override readonly name = 'IncompatibleWorkersError';
  readonly reasons: readonly IncompatibilityReason[];

  constructor(reasons: readonly IncompatibilityReason[]) {
    super(`workers are incompatible: ${reasons.map((reason) => `${reason.code}: ${reason.message}`).join('; ')}`);
    this.reasons = reasons;
  }
}
