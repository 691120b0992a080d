export type IncompatibilityCode =
  | 'NUM_LAYERS_MISMATCH'
  | 'KV_PLANES_MISMATCH'
  | 'BLOCK_TOKENS_MISMATCH'
  | 'NUM_KV_HEADS_MISMATCH'
  | 'HEAD_DIM_MISMATCH'
  | 'DTYPE_MISMATCH'
  | 'HEAD_ORDER_MISMATCH'
  | 'TP_SIZES_NOT_DIVISIBLE';

export interface IncompatibilityReason {
  readonly code: IncompatibilityCode;
  /** Dotted path of what differs, such as `geometry.dtype` or `tpSize`. */
  readonly field: string;
  readonly source: unknown;
  readonly destination: unknown;
  readonly message: string;
}
