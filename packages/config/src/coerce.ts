import type { ValueJsonSchema } from './descriptions.js';

export type Coerced = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly reason: string };

/** How env and argv strings become values; quoted in every coercion error. */
export const COERCION_RULES = 'booleans are true|false|1|0, numbers decimal, lists comma-separated';

const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const DECIMAL_PARTS = /^([+-]?)(\d*)\.?(\d*)(?:[eE]([+-]?\d+))?$/;

/** A decimal's value as its significant digits and the power of ten of the last one: `-0.0150` is `-15e-3`, zero `0`. */
function exactDecimal(text: string): string {
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = DECIMAL_PARTS.exec(text) ?? [];
  const digits = `${whole}${fraction}`.replace(/^0+/, '');
  const significant = digits.replace(/0+$/, '');
  if (significant === '') return '0';
  const power = Number(exponent) - fraction.length + (digits.length - significant.length);
  return `${sign === '-' ? '-' : ''}${significant}e${power}`;
}

/**
 * `text` as a number, refused where the number would not be what was written: more significant digits
 * than a double keeps (`0.99999999999999999` would be 1), out of its range (`1e-400` would be 0), or for
 * an integer setting, past `Number.MAX_SAFE_INTEGER`, beyond which integers are not all held exactly.
 */
function coerceNumber(text: string, schema: ValueJsonSchema): Coerced {
  if (!DECIMAL.test(text))
    return { ok: false, reason: `cannot read ${JSON.stringify(text)} as a number (${COERCION_RULES})` };
  const value = Number(text);
  const read = String(value);
  if (!DECIMAL.test(read) || exactDecimal(read) !== exactDecimal(text)) {
    return {
      ok: false,
      reason: `cannot read ${JSON.stringify(text)} as a number without changing it: it would be ${read} (a number keeps 15 significant digits, between 1e-307 and 1e308 in size)`,
    };
  }
  return integerBeyondSafe(text, value, schema) ?? { ok: true, value };
}

/** The refusal of `value`, written as `text`, for an integer setting past `Number.MAX_SAFE_INTEGER`; undefined if none. */
function integerBeyondSafe(text: string, value: number, schema: ValueJsonSchema): Coerced | undefined {
  if (schema['type'] !== 'integer' || Math.abs(value) <= Number.MAX_SAFE_INTEGER) return undefined;
  return {
    ok: false,
    reason: `cannot read ${JSON.stringify(text)} as an integer exactly: past ${Number.MAX_SAFE_INTEGER}, the largest a number holds exactly with every integer below it`,
  };
}

/** The hexadecimal and octal integers of YAML's core schema, which its parser reads as the nearest number. */
const YAML_HEX_OR_OCTAL = /^(0x[0-9a-fA-F]+|0o[0-7]+)$/;

/** A YAML hexadecimal or octal integer's value, refused as a decimal is where the number would not be what was written. */
function coerceHexOrOctal(text: string, schema: ValueJsonSchema): Coerced {
  const written = BigInt(text);
  const value = Number(written);
  if (BigInt(value) !== written) {
    return {
      ok: false,
      reason: `cannot read ${JSON.stringify(text)} as a number without changing it: it would be ${value} (${written} as written; a number holds every integer up to ${Number.MAX_SAFE_INTEGER} exactly)`,
    };
  }
  return integerBeyondSafe(text, value, schema) ?? { ok: true, value };
}

/** The schema of a list setting's items. */
const itemSchemaOf = (schema: ValueJsonSchema): ValueJsonSchema => (schema['items'] ?? {}) as ValueJsonSchema;

/**
 * Why the numbers a settings file wrote for a setting of `schema` (its value, or its list's items) are
 * refused, if they are: a decimal is held to the rule of env and argv numbers (`coerceNumber`), and a YAML
 * hexadecimal or octal integer to the same (`coerceHexOrOctal`), which the file's parser applies none of.
 * `.inf` and `.nan` are left to the setting's schema.
 */
export function writtenNumbersProblem(texts: readonly string[], schema: ValueJsonSchema): string | undefined {
  const numberSchema = schema['type'] === 'array' ? itemSchemaOf(schema) : schema;
  for (const text of texts) {
    const coerced = DECIMAL.test(text)
      ? coerceNumber(text, numberSchema)
      : YAML_HEX_OR_OCTAL.test(text)
        ? coerceHexOrOctal(text, numberSchema)
        : undefined;
    if (coerced?.ok === false) return coerced.reason;
  }
  return undefined;
}

function coerceScalar(text: string, schema: ValueJsonSchema): Coerced {
  switch (schema['type']) {
    case 'boolean':
      if (text === 'true' || text === '1') return { ok: true, value: true };
      if (text === 'false' || text === '0') return { ok: true, value: false };
      return { ok: false, reason: `cannot read ${JSON.stringify(text)} as a boolean (${COERCION_RULES})` };
    case 'integer':
    case 'number':
      return coerceNumber(text, schema);
    default:
      return { ok: true, value: text };
  }
}

/**
 * Turns an env or argv string into a value of the setting's JSON Schema type. Only the reading is done
 * here; the setting's schema then checks the value's rule.
 */
export function coerceText(text: string, schema: ValueJsonSchema): Coerced {
  if (schema['type'] !== 'array') return coerceScalar(text, schema);
  const itemSchema = itemSchemaOf(schema);
  const items = text === '' ? [] : text.split(',').map((item) => item.trim());
  const values: unknown[] = [];
  for (const item of items) {
    const coerced = coerceScalar(item, itemSchema);
    if (!coerced.ok) return coerced;
    values.push(coerced.value);
  }
  return { ok: true, value: values };
}
