/** Qwen3-0.6B, bf16, 64-token blocks: 28 layers × 2 planes × 131,072 bytes per block (`referenceGeometries` of @kvreuse/descriptors). */
export const QWEN3_PIECE_BYTES = 131_072;
export const QWEN3_PIECES_PER_BLOCK = 28 * 2;
export const QWEN3_PREFIX_BLOCKS = 42;
/** The 42-block prefix: 2,352 layer-plane pieces, 308,281,344 bytes. */
export const QWEN3_PREFIX_PIECES = QWEN3_PREFIX_BLOCKS * QWEN3_PIECES_PER_BLOCK;
export const QWEN3_PREFIX_BYTES = QWEN3_PREFIX_PIECES * QWEN3_PIECE_BYTES;
