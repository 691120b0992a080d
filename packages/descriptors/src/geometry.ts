import { z } from 'zod';
import { positiveCount } from './bank.js';
import { InvalidGeometryError } from './errors.js';
import { type FieldIssue, oneOfRule } from './field-issue.js';
import { toFieldIssues, unreadableInput } from './zod-issues.js';

export const dtypes = ['fp32', 'bf16', 'fp16', 'fp8_e4m3', 'fp8_e5m2', 'int8'] as const;
export type Dtype = (typeof dtypes)[number];

const dtypeBytes: Readonly<Record<Dtype, number>> = {
  fp32: 4,
  bf16: 2,
  fp16: 2,
  fp8_e4m3: 1,
  fp8_e5m2: 1,
  int8: 1,
};

/** Bytes of one element of `dtype`. Throws `InvalidGeometryError` for a dtype not in `dtypes`. */
export function bytesPerElement(dtype: Dtype): number {
  if (!Object.hasOwn(dtypeBytes, dtype)) {
    throw new InvalidGeometryError([{ field: 'dtype', value: dtype, rule: oneOfRule(dtypes) }]);
  }
  return dtypeBytes[dtype];
}

const bankLayouts = ['layer-separate', 'fully-contiguous'] as const;
const headOrders = ['NHD', 'HND'] as const;

/**
 * The issue of byte-size `factors` (name → value) whose product passes 2^53 − 1, past which a number no longer
 * counts bytes exactly, naming every factor; `undefined` when it stays within.
 */
export function byteProductIssue(factors: Readonly<Record<string, number>>): FieldIssue | undefined {
  const product = Object.values(factors).reduce((bytes, factor) => bytes * BigInt(factor), 1n);
  if (product <= BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return {
    field: Object.keys(factors).join(' × '),
    value: product,
    rule: 'must be at most 2^53 − 1 bytes, the most a number counts exactly',
  };
}

/** The KV layout facts of a model as served (version 1). */
const geometryFieldsSchema = z.strictObject(
  {
    numLayers: positiveCount,
    /** 2 = separate K and V planes, 1 = one latent plane (MLA). */
    kvPlanes: z.literal([1, 2], { error: 'must be 1 (MLA latent) or 2 (K and V)' }),
    blockTokens: positiveCount,
    numKvHeads: positiveCount,
    headDim: positiveCount,
    dtype: z.enum(dtypes, { error: oneOfRule(dtypes) }),
    /** `layer-separate`: one bank per (layer, plane); `fully-contiguous`: one bank, block = `[layer][plane][...]`. */
    bankLayout: z.enum(bankLayouts, { error: oneOfRule(bankLayouts) }),
    /** Inside one (block, layer, plane) piece: `HND` = `[head][token][dim]`, `NHD` = `[token][head][dim]`. */
    headOrder: z.enum(headOrders, { error: oneOfRule(headOrders) }),
  },
  { error: 'must be a KV geometry object' },
);

/**
 * The KV layout facts of a model as served (version 1). A geometry whose whole block (every layer, plane and
 * head) would pass 2^53 − 1 bytes is refused, so that every byte size of it is exact.
 */
export const geometrySchema = geometryFieldsSchema.superRefine(
  (geometry, ctx) => {
    const factors = {
      numLayers: geometry.numLayers,
      kvPlanes: geometry.kvPlanes,
      blockTokens: geometry.blockTokens,
      numKvHeads: geometry.numKvHeads,
      headDim: geometry.headDim,
      [`bytesPerElement(${geometry.dtype})`]: bytesPerElement(geometry.dtype),
    };
    const issue = byteProductIssue(factors);
    if (issue === undefined) return;
    const named = Object.entries(factors)
      .map(([name, factor]) => `${name} ${factor}`)
      .join(' × ');
    ctx.addIssue({
      code: 'custom',
      path: [],
      message: `the bytes of a block, ${named}, ${issue.rule}`,
      params: { value: issue.value },
    });
  },
  // Encoding a rank part gets here before the fields are checked, so they are checked here.
  { when: (payload) => payload.issues.length === 0 && geometryFieldsSchema.safeParse(payload.value).success },
);

export type Geometry = z.output<typeof geometrySchema>;
export type BankLayout = Geometry['bankLayout'];
export type HeadOrder = Geometry['headOrder'];

export type SafeParseResult<T, E> = { success: true; data: T } | { success: false; error: E };

/** Never throws: an input that throws while it is read (a getter, a proxy) is a failure too. */
export function safeParseGeometry(input: unknown): SafeParseResult<Geometry, InvalidGeometryError> {
  try {
    const result = geometrySchema.safeParse(input);
    if (result.success) return { success: true, data: result.data };
    return { success: false, error: new InvalidGeometryError(toFieldIssues(result.error, input)) };
  } catch (error) {
    return { success: false, error: new InvalidGeometryError([unreadableInput(error, input)], { cause: error }) };
  }
}

export function parseGeometry(input: unknown): Geometry {
  const result = safeParseGeometry(input);
  if (!result.success) throw result.error;
  return result.data;
}

/** Every geometry field, in the canonical order the digest uses. */
export const geometryFields = [
  'numLayers',
  'kvPlanes',
  'blockTokens',
  'numKvHeads',
  'headDim',
  'dtype',
  'bankLayout',
  'headOrder',
] as const satisfies readonly (keyof Geometry)[];

/**
 * The first of `fields` of a geometry argument that breaks `geometrySchema`'s rule for it, named
 * `${path}${field}`, or `undefined`; other fields are not read. For the functions that take part of a geometry.
 */
export function geometryFieldIssue(
  geometry: object,
  fields: readonly (keyof Geometry)[],
  path = '',
): FieldIssue | undefined {
  for (const field of fields) {
    const value: unknown = (geometry as Record<string, unknown>)[field];
    const result = geometrySchema.shape[field].safeParse(value);
    if (!result.success) return { field: `${path}${field}`, value, rule: result.error.issues[0]!.message };
  }
  return undefined;
}
